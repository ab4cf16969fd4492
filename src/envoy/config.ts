// envoyproxy/ratelimit's YAML config read as it is: domains, nested descriptors, limits, its refusals,
// and sluice's keys inside `rate_limit` (algorithm, window, burst, on_store_error, timeout).
import { SLIDING_LOG_MAX_LIMIT } from '../algorithms/sliding-log.js';
import { parseUnit, parseWindow, UNIT_MS, type UnitName, unitOfWindow } from './units.js';
import { EnvoyConfigError, readYaml, shown, type YamlMap, type YamlValue } from './yaml-reader.js';

export const ALGORITHMS = ['fixedWindow', 'slidingWindow', 'slidingLog', 'tokenBucket', 'gcra'] as const;
export type EnvoyAlgorithm = (typeof ALGORITHMS)[number];

/** What a rule answers when its store fails: gRPC UNAVAILABLE (Envoy's failure_mode_deny decides) or a limiter mode. */
export type StoreErrorAnswer = 'unavailable' | 'allow' | 'deny' | 'fallback';
const STORE_ERROR_ANSWERS: readonly string[] = ['unavailable', 'allow', 'deny', 'fallback'];

/** A descriptor's `rate_limit`, resolved. */
export interface RuleLimit {
  readonly unlimited: boolean;
  readonly requestsPerUnit: number;
  /** The unit reported in `current_limit`; undefined for a `window` that is no whole unit. */
  readonly unit: UnitName | undefined;
  readonly windowMs: number;
  readonly algorithm: EnvoyAlgorithm;
  readonly burst: number | undefined;
  readonly onStoreError: StoreErrorAnswer;
  readonly timeoutMs: number | undefined;
  /** `rate_limit.name` ('' when absent), which other rules' `replaces` name. */
  readonly name: string;
  readonly replaces: readonly string[];
}

/** One descriptor of the config tree. */
export interface Rule {
  /** `key` or `key_value`, as the reference names it; `*` in it makes a wildcard. */
  readonly finalKey: string;
  /** The domain and the final keys from the top, joined by dots: the reference's stats key. */
  readonly path: string;
  /** The final keys from the top, without the domain (the metric labels key1, key2). */
  readonly parts: readonly string[];
  readonly limit: RuleLimit | undefined;
  readonly shadowMode: boolean;
  readonly detailedMetric: boolean;
  readonly valueToMetric: boolean;
  readonly shareThreshold: boolean;
  readonly file: string;
  readonly line: number;
  readonly level: Level;
}

/** The descriptors at one level: exact keys, and the wildcard patterns split on `*` in the order written. */
export interface Level {
  readonly byKey: Map<string, Rule>;
  readonly wildcards: { readonly finalKey: string; readonly parts: readonly string[] }[];
}

export interface EnvoyConfig {
  readonly domains: ReadonlyMap<string, Level>;
  readonly files: readonly string[];
  /** Every rule with a limit, for building limiters once per load. */
  readonly rules: readonly Rule[];
}

const ROOT_KEYS = ['domain', 'descriptors'];
const DESCRIPTOR_KEYS = [
  'key',
  'value',
  'rate_limit',
  'descriptors',
  'shadow_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
];
const LIMIT_KEYS = ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces'];
const SLUICE_LIMIT_KEYS = ['algorithm', 'window', 'burst', 'on_store_error', 'timeout'];
/** Keys of the reference that sluice does not implement: refused, rather than silently ignored. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  quota_mode:
    'quota_mode is not supported by sluice (a descriptor over its limit always makes the request over)',
  metadata: 'metadata is not supported by sluice (responses carry no dynamic metadata)',
};

class FileReader {
  constructor(readonly file: string) {}

  fail(line: number, reason: string): never {
    throw new EnvoyConfigError(this.file, line, reason);
  }

  map(value: YamlValue | undefined, line: number, known: readonly string[], what: string): YamlMap {
    if (value === undefined || (value.kind === 'scalar' && value.value === null))
      return { line, entries: new Map() };
    if (value.kind !== 'map')
      this.fail(value.line, `config error, expected ${what} to be a map, got ${shown(value)}`);
    for (const [key, entry] of value.map.entries) {
      const at = entry.keyLine;
      const unsupported = UNSUPPORTED[key];
      if (unsupported !== undefined) this.fail(at, `config error, ${unsupported}`);
      if (!known.includes(key)) this.fail(at, `config error, unknown key '${key}'`);
    }
    return value.map;
  }

  list(value: YamlValue | undefined): readonly YamlValue[] {
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return [];
    if (value.kind !== 'list') this.fail(value.line, `config error, expected a list, got ${shown(value)}`);
    for (const item of value.items) {
      if (item.kind !== 'map') {
        this.fail(item.line, `config error, yaml file contains list of type other than map: ${shown(item)}`);
      }
    }
    return value.items;
  }

  text(map: YamlMap, key: string): string {
    const value = map.entries.get(key);
    if (value === undefined) return '';
    if (value.kind !== 'scalar')
      this.fail(value.line, `config error, expected '${key}' to be a string, got ${shown(value)}`);
    return value.text;
  }

  flag(map: YamlMap, key: string): boolean {
    const value = map.entries.get(key);
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return false;
    if (value.kind !== 'scalar' || typeof value.value !== 'boolean') {
      this.fail(value.line, `config error, expected '${key}' to be true or false, got ${shown(value)}`);
    }
    return value.value;
  }

  integer(map: YamlMap, key: string, max: number): number | undefined {
    const value = map.entries.get(key);
    if (value === undefined || (value.kind === 'scalar' && value.value === null)) return undefined;
    const number = value.kind === 'scalar' ? value.value : undefined;
    if (typeof number !== 'number' || !Number.isSafeInteger(number) || number < 0 || number > max) {
      this.fail(
        value.line,
        `config error, expected '${key}' to be a whole number from 0 to ${max}, got ${shown(value)}`,
      );
    }
    return number;
  }
}

function lineOf(map: YamlMap, key: string): number {
  const value = map.entries.get(key);
  return value === undefined ? map.line : value.keyLine;
}

function readLimit(reader: FileReader, value: YamlValue): RuleLimit {
  const spec = reader.map(value, value.line, [...LIMIT_KEYS, ...SLUICE_LIMIT_KEYS], "'rate_limit'");
  const unlimited = reader.flag(spec, 'unlimited');
  const unitText = reader.text(spec, 'unit');
  const unitName = parseUnit(unitText);
  const windowText = reader.text(spec, 'window');
  const algorithmText = reader.text(spec, 'algorithm');
  const burst = reader.integer(spec, 'burst', 2 ** 32 - 1);
  if (unlimited) {
    if (unitName !== undefined)
      reader.fail(lineOf(spec, 'unit'), 'should not specify rate limit unit when unlimited');
    for (const key of SLUICE_LIMIT_KEYS) {
      if (spec.entries.has(key)) reader.fail(lineOf(spec, key), `should not specify '${key}' when unlimited`);
    }
  }
  let windowMs = unitName === undefined ? 0 : UNIT_MS[unitName];
  if (spec.entries.has('window') && !unlimited) {
    if (spec.entries.has('unit'))
      reader.fail(lineOf(spec, 'window'), "give either 'unit' or 'window', not both");
    const parsed = parseWindow(windowText);
    if (parsed === undefined) {
      reader.fail(
        lineOf(spec, 'window'),
        `invalid window '${windowText}': expected a duration such as 90s, 1m30s, 500ms, 2h or 7d`,
      );
    }
    windowMs = parsed;
  } else if (!unlimited && unitName === undefined) {
    reader.fail(lineOf(spec, 'unit'), `invalid rate limit unit '${unitText}'`);
  }
  const algorithm = (algorithmText === '' ? 'fixedWindow' : algorithmText) as EnvoyAlgorithm;
  if (!ALGORITHMS.includes(algorithm)) {
    reader.fail(
      lineOf(spec, 'algorithm'),
      `invalid algorithm '${algorithmText}': expected one of ${ALGORITHMS.join(', ')}`,
    );
  }
  const requestsPerUnit = reader.integer(spec, 'requests_per_unit', 2 ** 32 - 1) ?? 0;
  if (burst !== undefined && algorithm !== 'tokenBucket' && algorithm !== 'gcra') {
    reader.fail(lineOf(spec, 'burst'), `'burst' applies to tokenBucket and gcra, not ${algorithm}`);
  }
  if (burst === 0) reader.fail(lineOf(spec, 'burst'), "'burst' must be at least 1");
  if (algorithm === 'slidingLog' && requestsPerUnit > SLIDING_LOG_MAX_LIMIT) {
    reader.fail(
      lineOf(spec, 'requests_per_unit'),
      `slidingLog keeps one entry per request: requests_per_unit must be at most ${SLIDING_LOG_MAX_LIMIT}, got ${requestsPerUnit} (slidingWindow approximates it in two counters)`,
    );
  }
  const onStoreError = reader.text(spec, 'on_store_error') || 'unavailable';
  if (!STORE_ERROR_ANSWERS.includes(onStoreError)) {
    reader.fail(
      lineOf(spec, 'on_store_error'),
      `invalid on_store_error '${onStoreError}': expected unavailable, allow, deny or fallback`,
    );
  }
  let timeoutMs: number | undefined;
  if (spec.entries.has('timeout')) {
    timeoutMs = parseWindow(reader.text(spec, 'timeout'));
    if (timeoutMs === undefined || timeoutMs > 2_147_483_647) {
      reader.fail(
        lineOf(spec, 'timeout'),
        `invalid timeout '${reader.text(spec, 'timeout')}': expected a duration such as 50ms or 2s`,
      );
    }
  }
  const name = reader.text(spec, 'name');
  const replaces = reader.list(spec.entries.get('replaces')).map((item) => {
    const entry = reader.map(item, item.line, ['name'], 'a replaces entry');
    const replaced = reader.text(entry, 'name');
    if (replaced === '') reader.fail(item.line, 'should not have an empty replaces entry');
    if (replaced === name) reader.fail(item.line, 'replaces should not contain name of same descriptor');
    return replaced;
  });
  return {
    unlimited,
    requestsPerUnit: unlimited ? 0 : requestsPerUnit,
    unit: unitName ?? (windowMs > 0 ? unitOfWindow(windowMs) : undefined),
    windowMs,
    algorithm,
    burst,
    onStoreError: onStoreError as StoreErrorAnswer,
    timeoutMs,
    name,
    replaces,
  };
}

function loadLevel(
  reader: FileReader,
  level: Level,
  parent: { readonly path: string; readonly parts: readonly string[] },
  items: readonly YamlValue[],
  rules: Rule[],
): void {
  for (const item of items) {
    const spec = reader.map(item, item.line, DESCRIPTOR_KEYS, 'a descriptor');
    const key = reader.text(spec, 'key');
    if (key === '') reader.fail(spec.line, 'descriptor has empty key');
    const value = reader.text(spec, 'value');
    const finalKey = value === '' ? key : `${key}_${value}`;
    const path = `${parent.path}.${finalKey}`;
    const parts = [...parent.parts, finalKey];
    if (level.byKey.has(finalKey)) reader.fail(spec.line, `duplicate descriptor composite key '${path}'`);
    const limitSpec = spec.entries.get('rate_limit');
    const shareThreshold = reader.flag(spec, 'share_threshold');
    if (shareThreshold && !finalKey.includes('*')) {
      reader.fail(
        lineOf(spec, 'share_threshold'),
        `share_threshold can only be used with wildcard values (containing '*'), but found key '${finalKey}'`,
      );
    }
    const rule: Rule = {
      finalKey,
      path,
      parts,
      limit:
        limitSpec === undefined || (limitSpec.kind === 'scalar' && limitSpec.value === null)
          ? undefined
          : readLimit(reader, limitSpec),
      shadowMode: reader.flag(spec, 'shadow_mode'),
      detailedMetric: reader.flag(spec, 'detailed_metric'),
      valueToMetric: reader.flag(spec, 'value_to_metric'),
      shareThreshold,
      file: reader.file,
      line: spec.line,
      level: { byKey: new Map(), wildcards: [] },
    };
    if (finalKey.includes('*')) level.wildcards.push({ finalKey, parts: finalKey.split('*') });
    level.byKey.set(finalKey, rule);
    if (rule.limit !== undefined) rules.push(rule);
    loadLevel(reader, rule.level, { path, parts }, reader.list(spec.entries.get('descriptors')), rules);
  }
}

/** One file's text, named as messages should name it. */
export interface ConfigSource {
  readonly file: string;
  readonly text: string;
}

/**
 * Builds the config from every file (one domain each; a domain in two files is refused, as the
 * reference does by default). Throws EnvoyConfigError naming the file, the line and the reason.
 */
export function buildConfig(sources: readonly ConfigSource[]): EnvoyConfig {
  const domains = new Map<string, Level>();
  const owners = new Map<string, string>();
  const rules: Rule[] = [];
  for (const { file, text } of sources) {
    const reader = new FileReader(file);
    const root = reader.map(readYaml(file, text), 1, ROOT_KEYS, 'the file');
    const domain = reader.text(root, 'domain');
    if (domain === '') reader.fail(lineOf(root, 'domain'), 'config file cannot have empty domain');
    const owner = owners.get(domain);
    if (owner !== undefined) {
      reader.fail(lineOf(root, 'domain'), `duplicate domain '${domain}' in config file (also in ${owner})`);
    }
    owners.set(domain, file);
    const level: Level = { byKey: new Map(), wildcards: [] };
    loadLevel(
      reader,
      level,
      { path: domain, parts: [] },
      reader.list(root.entries.get('descriptors')),
      rules,
    );
    domains.set(domain, level);
  }
  return { domains, files: sources.map((source) => source.file), rules };
}
