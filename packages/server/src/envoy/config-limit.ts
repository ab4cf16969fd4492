// A descriptor's `rate_limit` read and checked: the reference's keys and refusals, and sluice's own keys.
import { SLIDING_LOG_MAX_LIMIT } from 'sluice';
import { type FileReader, lineOf } from './config-reader.js';
import { parseUnit, parseWindow, UNIT_MS, type UnitName, unitOfWindow } from './units.js';
import type { YamlMap, YamlValue } from './yaml-reader.js';

export const ENVOY_ALGORITHMS = [
  'fixedWindow',
  'slidingWindow',
  'slidingLog',
  'tokenBucket',
  'gcra',
] as const;
export type EnvoyAlgorithm = (typeof ENVOY_ALGORITHMS)[number];

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
  /**
   * sluice's `overrides: true`: the rule's decisions read limits and denials stored for its
   * descriptors (`sluice limits`, `sluice deny`); a descriptor's own `limit` still wins.
   */
  readonly overrides: boolean;
  /** `rate_limit.name` ('' when absent), which other rules' `replaces` name. */
  readonly name: string;
  readonly replaces: readonly string[];
  /**
   * `charge_over_limit`: the rule is charged after the response (Envoy's `apply_on_stream_done`
   * with `hits_addend` from the response): a call with hits takes them even past the limit, into
   * debt, and answers OK; a call of 0 hits is the check, over while the limit is reached or owed.
   */
  readonly chargeOverLimit: boolean;
}

const LIMIT_KEYS = ['unit', 'requests_per_unit', 'unlimited', 'name', 'replaces'];
const SLUICE_LIMIT_KEYS = [
  'algorithm',
  'window',
  'burst',
  'on_store_error',
  'timeout',
  'overrides',
  'charge_over_limit',
];
const MAX_UINT32 = 2 ** 32 - 1;
/** The longest timer Node keeps (a longer one fires at once). */
const MAX_TIMEOUT_MS = 2_147_483_647;

/** The window: a `unit` (the reference's) or a `window` of any length (sluice's), not both. */
function readWindow(
  reader: FileReader,
  spec: YamlMap,
  unlimited: boolean,
): { unitName: UnitName | undefined; windowMs: number } {
  const unitText = reader.text(spec, 'unit');
  const unitName = parseUnit(unitText);
  if (unlimited) {
    if (unitName !== undefined)
      reader.fail(lineOf(spec, 'unit'), 'should not specify rate limit unit when unlimited');
    for (const key of SLUICE_LIMIT_KEYS) {
      if (spec.entries.has(key)) reader.fail(lineOf(spec, key), `should not specify '${key}' when unlimited`);
    }
    return { unitName, windowMs: 0 };
  }
  if (!spec.entries.has('window')) {
    if (unitName === undefined) reader.fail(lineOf(spec, 'unit'), `invalid rate limit unit '${unitText}'`);
    return { unitName, windowMs: UNIT_MS[unitName] };
  }
  if (spec.entries.has('unit'))
    reader.fail(lineOf(spec, 'window'), "give either 'unit' or 'window', not both");
  const windowText = reader.text(spec, 'window');
  const windowMs = parseWindow(windowText);
  if (windowMs === undefined) {
    reader.fail(
      lineOf(spec, 'window'),
      `invalid window '${windowText}': expected a duration such as 90s, 1m30s, 500ms, 2h or 7d`,
    );
  }
  return { unitName, windowMs };
}

/** The algorithm, and the burst it may take. */
function readAlgorithm(
  reader: FileReader,
  spec: YamlMap,
  requestsPerUnit: number,
): { algorithm: EnvoyAlgorithm; burst: number | undefined } {
  const algorithmText = reader.text(spec, 'algorithm');
  const algorithm = (algorithmText === '' ? 'fixedWindow' : algorithmText) as EnvoyAlgorithm;
  if (algorithmText === 'concurrency') {
    // A slot is freed when its request ends, which Envoy's rate limit service is never told.
    reader.fail(
      lineOf(spec, 'algorithm'),
      "algorithm 'concurrency' cannot be served to Envoy: its rate limit service API has no call for the end of a request, so a slot taken here would only come back when its lease lapsed. Limit requests in flight in the application (sluice's HTTP middleware, or POST /v1/limit and /v1/release), or with Envoy's own circuit breakers (max_requests)",
    );
  }
  if (!ENVOY_ALGORITHMS.includes(algorithm)) {
    reader.fail(
      lineOf(spec, 'algorithm'),
      `invalid algorithm '${algorithmText}': expected one of ${ENVOY_ALGORITHMS.join(', ')}`,
    );
  }
  const burst = reader.integer(spec, 'burst', MAX_UINT32);
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
  return { algorithm, burst };
}

/** What a store failure answers, and how long a decision waits for the store. */
function readStoreSettings(
  reader: FileReader,
  spec: YamlMap,
): { onStoreError: StoreErrorAnswer; timeoutMs: number | undefined } {
  const onStoreError = reader.text(spec, 'on_store_error') || 'unavailable';
  if (!STORE_ERROR_ANSWERS.includes(onStoreError)) {
    reader.fail(
      lineOf(spec, 'on_store_error'),
      `invalid on_store_error '${onStoreError}': expected unavailable, allow, deny or fallback`,
    );
  }
  if (!spec.entries.has('timeout'))
    return { onStoreError: onStoreError as StoreErrorAnswer, timeoutMs: undefined };
  const timeoutText = reader.text(spec, 'timeout');
  const timeoutMs = parseWindow(timeoutText);
  if (timeoutMs === undefined || timeoutMs > MAX_TIMEOUT_MS) {
    reader.fail(
      lineOf(spec, 'timeout'),
      `invalid timeout '${timeoutText}': expected a duration such as 50ms or 2s`,
    );
  }
  return { onStoreError: onStoreError as StoreErrorAnswer, timeoutMs };
}

/** The names in `replaces`: none empty, none the rule's own. */
function readReplaces(reader: FileReader, spec: YamlMap, name: string): string[] {
  return reader.list(spec.entries.get('replaces')).map((item) => {
    const entry = reader.map(item, item.line, ['name'], 'a replaces entry');
    const replaced = reader.text(entry, 'name');
    if (replaced === '') reader.fail(item.line, 'should not have an empty replaces entry');
    if (replaced === name) reader.fail(item.line, 'replaces should not contain name of same descriptor');
    return replaced;
  });
}

/** Reads a descriptor's `rate_limit`; throws EnvoyConfigError naming the line and the reason. */
export function readLimit(reader: FileReader, value: YamlValue): RuleLimit {
  const spec = reader.map(value, value.line, [...LIMIT_KEYS, ...SLUICE_LIMIT_KEYS], "'rate_limit'");
  const unlimited = reader.flag(spec, 'unlimited');
  const { unitName, windowMs } = readWindow(reader, spec, unlimited);
  const requestsPerUnit = reader.integer(spec, 'requests_per_unit', MAX_UINT32) ?? 0;
  const { algorithm, burst } = readAlgorithm(reader, spec, requestsPerUnit);
  const name = reader.text(spec, 'name');
  return {
    unlimited,
    requestsPerUnit: unlimited ? 0 : requestsPerUnit,
    unit: unitName ?? (windowMs > 0 ? unitOfWindow(windowMs) : undefined),
    windowMs,
    algorithm,
    burst,
    ...readStoreSettings(reader, spec),
    overrides: reader.flag(spec, 'overrides'),
    name,
    replaces: readReplaces(reader, spec, name),
    chargeOverLimit: reader.flag(spec, 'charge_over_limit'),
  };
}
