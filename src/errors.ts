// One error class with a stable code per failure, so callers branch on `code`, never on messages.

/** Every code sluice throws or rejects with. Each has its anchor in docs/errors.md (see {@link errorDocs}). */
export const ERROR_CODES = {
  /** A configuration option is missing or has the wrong value. Thrown at construction. */
  INVALID_OPTION: 'ERR_SLUICE_INVALID_OPTION',
  /** The sliding log was given a limit above its ceiling. Thrown at construction. */
  LIMIT_TOO_HIGH: 'ERR_SLUICE_LIMIT_TOO_HIGH',
  /** The identifier is not a non-empty string of at most 1 KiB. Nothing was written. */
  INVALID_IDENTIFIER: 'ERR_SLUICE_INVALID_IDENTIFIER',
  /** The cost or refund amount is not a positive safe integer. Nothing was written. */
  INVALID_COST: 'ERR_SLUICE_INVALID_COST',
  /** A call's `limit` is not a positive safe integer, or leaves a region's share below one unit. Nothing was written. */
  INVALID_LIMIT: 'ERR_SLUICE_INVALID_LIMIT',
  /** The cost is above what the policy can ever grant. Nothing was written. */
  COST_EXCEEDS_LIMIT: 'ERR_SLUICE_COST_EXCEEDS_LIMIT',
  /** The Redis client is neither an ioredis nor a node-redis client. */
  UNSUPPORTED_CLIENT: 'ERR_SLUICE_UNSUPPORTED_CLIENT',
  /** The store failed (connection lost, server error). `cause` holds the original error. */
  STORE: 'ERR_SLUICE_STORE',
  /** The store replied with something no sluice script returns. */
  BAD_REPLY: 'ERR_SLUICE_BAD_REPLY',
  /** The clock returned something other than a finite, non-negative number of milliseconds. */
  INVALID_CLOCK: 'ERR_SLUICE_INVALID_CLOCK',
  /** The store did not answer within the limiter's `timeoutMs`. Given to `onError`; `reset` rejects with it. */
  TIMEOUT: 'ERR_SLUICE_TIMEOUT',
  /** The keys of an atomic multi-key check (`all()`) would land on different cluster slots. Nothing was written. */
  CROSS_SLOT: 'ERR_SLUICE_CROSS_SLOT',
  /**
   * The HTTP middleware keys by client address and the runtime gave none (fetch, Hono without
   * `remoteAddress`): a configuration error, answered through the framework's error path.
   */
  NO_CLIENT_ADDRESS: 'ERR_SLUICE_NO_CLIENT_ADDRESS',
  /**
   * The operation does not apply to the limiter's policy: `refund` on a concurrency policy (its
   * slots come back with `release`), `release` or `extend` on any other. Nothing was written.
   */
  UNSUPPORTED_OPERATION: 'ERR_SLUICE_UNSUPPORTED_OPERATION',
  /** What was given to `release` or `extend` is not a lease a concurrency policy returned. Nothing was written. */
  INVALID_LEASE: 'ERR_SLUICE_INVALID_LEASE',
  /** A throttled call got no slot within `maxWaitMs` (or a slot further away than it): it was not made. */
  MAX_WAIT: 'ERR_SLUICE_MAX_WAIT',
  /** A reservation was settled twice (`reserve()`'s `settle`). The second call recorded nothing. */
  ALREADY_SETTLED: 'ERR_SLUICE_ALREADY_SETTLED',
  /** A load shedder refused a call of `shedder.run()`: its class had no room under the limit. It was not made. */
  SHED: 'ERR_SLUICE_SHED',
} as const;

export type ErrorCode = (typeof ERROR_CODES)[keyof typeof ERROR_CODES];

/**
 * Where a code is explained: its anchor in docs/errors.md, which ships in the package
 * (`node_modules/sluice/docs/errors.md`), as the page's heading for the code renders it.
 *
 * @example
 * errorDocs('ERR_SLUICE_INVALID_COST'); // 'sluice/docs/errors.md#err_sluice_invalid_cost'
 */
export function errorDocs(code: ErrorCode): string {
  return `sluice/docs/errors.md#${code.toLowerCase()}`;
}

/**
 * The error sluice throws and rejects with. Its message ends with a pointer to the code's
 * explanation: "Expected `limit` to be a positive integer, got 0 (number). See
 * sluice/docs/errors.md#err_sluice_invalid_option".
 *
 * @example
 * try { await limiter.limit(id, { cost }); }
 * catch (error) { if (error instanceof SluiceError && error.code === 'ERR_SLUICE_INVALID_COST') ... }
 */
export class SluiceError extends Error {
  override readonly name = 'SluiceError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message: string, options?: { cause?: unknown }) {
    super(withPointer(code, message), options);
    this.code = code;
  }
}

/** The message, ended as a sentence, then where its code is explained; once, however often it is wrapped. */
function withPointer(code: ErrorCode, message: string): string {
  const pointer = `See ${errorDocs(code)}`;
  const text = message.trimEnd();
  if (text.endsWith(pointer)) return text;
  return `${text}${/[.!?]$/.test(text) ? '' : '.'} ${pointer}`;
}

/** Renders a received value for a message: `0 (number)`, `"abc" (string)`, `undefined`. */
export function describeValue(value: unknown): string {
  if (value === undefined || value === null) return String(value);
  if (typeof value === 'string') {
    const shown = value.length > 60 ? `${value.slice(0, 57)}...` : value;
    return `${JSON.stringify(shown)} (string, length ${value.length})`;
  }
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') {
    return `${String(value)} (${typeof value})`;
  }
  if (typeof value === 'function') return 'a function';
  if (Array.isArray(value)) return 'an array';
  return `an object`;
}

/** Builds the error for an option that does not have the expected shape. */
export function invalidOption(option: string, expected: string, value: unknown): SluiceError {
  return new SluiceError(
    ERROR_CODES.INVALID_OPTION,
    `Expected \`${option}\` to be ${expected}, got ${describeValue(value)}.`,
  );
}
