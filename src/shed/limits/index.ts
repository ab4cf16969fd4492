// The `limit` option of createShedder(): an algorithm's name or object, checked and built into its class.
import { invalidOption } from '../../errors.js';
import { knownKeys, optionsObject, positiveInteger } from '../../validate.js';
import { AIMD_DEFAULTS, AimdLimit, type AimdParams } from './aimd.js';
import { GRADIENT2_DEFAULTS, Gradient2Limit, type Gradient2Params } from './gradient2.js';
import { BOUNDS_DEFAULTS, type Bounds, type LimitAlgorithm, type LimitBounds } from './limit.js';
import { VEGAS_DEFAULTS, VegasLimit, type VegasParams } from './vegas.js';

export { AIMD_DEFAULTS, AimdLimit, type AimdParams } from './aimd.js';
export { GRADIENT2_DEFAULTS, Gradient2Limit, type Gradient2Params } from './gradient2.js';
export { BOUNDS_DEFAULTS, type LimitAlgorithm, type LimitBounds, type LimitWindow } from './limit.js';
export { VEGAS_DEFAULTS, VegasLimit, type VegasParams } from './vegas.js';

/** When a sampling window closes: both must be met. */
export interface WindowOptions {
  /**
   * The shortest window, in ms: the limit changes at most this often.
   * @default 100
   */
  readonly windowMs?: number;
  /**
   * The fewest requests a window holds: a quiet service waits for this many before it learns.
   * @default 10
   */
  readonly windowSamples?: number;
}

/** The defaults of {@link WindowOptions}. */
export const WINDOW_DEFAULTS = { windowMs: 100, windowSamples: 10 } as const;

/** The `limit` option: a name, or an object naming the algorithm with its bounds, window and parameters. */
export type LimitOption =
  | 'gradient2'
  | 'vegas'
  | 'aimd'
  | ({ readonly algorithm: 'gradient2' } & LimitBounds & WindowOptions & Gradient2Params)
  | ({ readonly algorithm: 'vegas' } & LimitBounds & WindowOptions & VegasParams)
  | ({ readonly algorithm: 'aimd' } & LimitBounds & WindowOptions & AimdParams);

/** A built limit: the algorithm and its window. */
export interface ResolvedLimit {
  readonly algorithm: LimitAlgorithm;
  readonly windowMs: number;
  readonly windowSamples: number;
}

const ALGORITHMS = {
  gradient2: { defaults: GRADIENT2_DEFAULTS },
  vegas: { defaults: VEGAS_DEFAULTS },
  aimd: { defaults: AIMD_DEFAULTS },
} as const;

type AlgorithmName = keyof typeof ALGORITHMS;

function isAlgorithmName(value: unknown): value is AlgorithmName {
  return typeof value === 'string' && Object.hasOwn(ALGORITHMS, value);
}

/** A finite number in [low, high] (`high` excluded when `openHigh`). */
function numberIn(option: string, value: unknown, low: number, high: number, openHigh = false): number {
  if (
    typeof value !== 'number' ||
    !Number.isFinite(value) ||
    value < low ||
    value > high ||
    (openHigh && value === high)
  ) {
    throw invalidOption(option, `a number from ${low} to ${high}${openHigh ? ' (excluded)' : ''}`, value);
  }
  return value;
}

function resolveBounds(raw: Record<string, unknown>): Bounds {
  const min = positiveInteger('limit.min', raw.min ?? BOUNDS_DEFAULTS.min);
  const max = positiveInteger('limit.max', raw.max ?? Math.max(BOUNDS_DEFAULTS.max, min));
  if (max < min) throw invalidOption('limit.max', `a whole number of at least \`limit.min\` (${min})`, max);
  const initial = positiveInteger(
    'limit.initial',
    raw.initial ?? Math.min(max, Math.max(min, BOUNDS_DEFAULTS.initial)),
  );
  if (initial < min || initial > max) {
    throw invalidOption(
      'limit.initial',
      `a whole number from \`limit.min\` (${min}) to \`limit.max\` (${max})`,
      initial,
    );
  }
  return { initial, min, max };
}

/** Each parameter of `name`, its default applied and its range checked. */
function resolveParams(name: AlgorithmName, raw: Record<string, unknown>): Record<string, number> {
  const given = (key: string, fallback: number): unknown => raw[key] ?? fallback;
  switch (name) {
    case 'gradient2': {
      const d = GRADIENT2_DEFAULTS;
      return {
        tolerance: numberIn('limit.tolerance', given('tolerance', d.tolerance), 1, 10),
        queue: numberIn('limit.queue', given('queue', d.queue), 0, 1_000_000),
        smoothing: numberIn('limit.smoothing', given('smoothing', d.smoothing), 0.01, 1),
        longWindow: positiveInteger('limit.longWindow', given('longWindow', d.longWindow)),
      };
    }
    case 'vegas': {
      const d = VEGAS_DEFAULTS;
      const alpha = numberIn('limit.alpha', given('alpha', d.alpha), 0, 1000);
      const beta = numberIn('limit.beta', given('beta', d.beta), alpha, 1000);
      return {
        alpha,
        beta,
        probeWindows: positiveInteger('limit.probeWindows', given('probeWindows', d.probeWindows)),
        smoothing: numberIn('limit.smoothing', given('smoothing', d.smoothing), 0.01, 1),
      };
    }
    case 'aimd': {
      const d = AIMD_DEFAULTS;
      return {
        backoffRatio: numberIn('limit.backoffRatio', given('backoffRatio', d.backoffRatio), 0.5, 1, true),
        timeoutMs: positiveInteger('limit.timeoutMs', given('timeoutMs', d.timeoutMs)),
      };
    }
  }
}

/**
 * Builds the algorithm the `limit` option names, with its window.
 *
 * @example
 * resolveLimit({ algorithm: 'vegas', initial: 10, max: 200 }).algorithm.limit; // 10
 */
export function resolveLimit(option: LimitOption | undefined): ResolvedLimit {
  const value: unknown = option ?? 'gradient2';
  if (typeof value === 'string' && !isAlgorithmName(value)) {
    throw invalidOption('limit', "'gradient2', 'vegas' or 'aimd' (or an object with `algorithm`)", value);
  }
  const raw = isAlgorithmName(value) ? { algorithm: value } : optionsObject('limit', value, true);
  const name = raw.algorithm;
  if (!isAlgorithmName(name)) {
    throw invalidOption('limit.algorithm', "'gradient2', 'vegas' or 'aimd'", name);
  }
  knownKeys('limit', raw, [
    'algorithm',
    'initial',
    'min',
    'max',
    'windowMs',
    'windowSamples',
    ...Object.keys(ALGORITHMS[name].defaults),
  ]);
  const bounds = resolveBounds(raw);
  const params = resolveParams(name, raw);
  const windowMs = positiveInteger('limit.windowMs', raw.windowMs ?? WINDOW_DEFAULTS.windowMs, 3_600_000);
  const windowSamples = positiveInteger(
    'limit.windowSamples',
    raw.windowSamples ?? WINDOW_DEFAULTS.windowSamples,
  );
  return { algorithm: createAlgorithm(name, bounds, params), windowMs, windowSamples };
}

function createAlgorithm(
  name: AlgorithmName,
  bounds: Bounds,
  params: Record<string, number>,
): LimitAlgorithm {
  // resolveParams gave each class exactly its own parameters, all present.
  if (name === 'gradient2') return new Gradient2Limit(bounds, params as Required<Gradient2Params>);
  if (name === 'vegas') return new VegasLimit(bounds, params as Required<VegasParams>);
  return new AimdLimit(bounds, params as Required<AimdParams>);
}
