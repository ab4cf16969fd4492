// envoyproxy/ratelimit's YAML config read as it is: domains, nested descriptors, limits, quota mode, metadata,
// its refusals, and sluice's keys inside `rate_limit` (algorithm, window, burst, on_store_error, timeout).
import { type RuleLimit, readLimit } from './config-limit.js';
import { FileReader, isAbsent, lineOf } from './config-reader.js';
import { type MetadataObject, readMetadata } from './metadata.js';
import { readYaml, type YamlValue } from './yaml-reader.js';

export {
  ENVOY_ALGORITHMS,
  type EnvoyAlgorithm,
  type RuleLimit,
  type StoreErrorAnswer,
} from './config-limit.js';

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
  /**
   * Over its limit, this descriptor alone does not make the request over: the request is over only
   * when every quota-mode descriptor of it is (or an ordinary one is).
   */
  readonly quotaMode: boolean;
  /** `metadata`, returned to Envoy (with `--envoy-metadata`) when this descriptor passes. */
  readonly metadata: MetadataObject | undefined;
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
  'quota_mode',
  'detailed_metric',
  'value_to_metric',
  'share_threshold',
  'metadata',
];

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
      limit: limitSpec === undefined || isAbsent(limitSpec) ? undefined : readLimit(reader, limitSpec),
      shadowMode: reader.flag(spec, 'shadow_mode'),
      quotaMode: reader.flag(spec, 'quota_mode'),
      metadata: readMetadata(reader, spec.entries.get('metadata')),
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
    const yaml = readYaml(file, text);
    reader.refuseNonStringKeys(yaml);
    const root = reader.map(yaml, 1, ROOT_KEYS, 'the file');
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
