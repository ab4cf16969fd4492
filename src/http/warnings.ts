// Warnings about configurations that fail silently (a proxy nobody trusts, hops a request lacks): each code once.
import { invalidOption } from '../errors.js';

/**
 * The codes of the middleware's warnings; each can be turned off on its own.
 *
 * @example
 * rateLimit({ limiter, warnings: { [WARNING_CODES.PROXY_HOPS_MISSING]: false } });
 */
export const WARNING_CODES = {
  /**
   * A request from a private or loopback address carries `X-Forwarded-For` or `Forwarded`, while
   * `clientIp()` trusts no proxy: a proxy you run is probably in front, and every client behind it
   * shares the proxy's bucket.
   */
  FORWARDED_UNTRUSTED: 'SLUICE_FORWARDED_UNTRUSTED',
  /**
   * `trustProxy` trusts more proxies than a request came through: the address taken as the
   * client's is one the client may have written itself (or the proxy's own).
   */
  PROXY_HOPS_MISSING: 'SLUICE_PROXY_HOPS_MISSING',
} as const;

export type WarningCode = (typeof WARNING_CODES)[keyof typeof WARNING_CODES];

const ALL_CODES: readonly WarningCode[] = Object.values(WARNING_CODES);

/** A warning about the configuration, seen in a request. */
export interface SluiceWarning {
  readonly code: WarningCode;
  /** What was seen, what it means, and what to change. */
  readonly message: string;
}

/** `false` turns every warning off; an object turns codes off one by one (`{ SLUICE_PROXY_HOPS_MISSING: false }`). */
export type WarningOptions = boolean | { readonly [Code in WarningCode]?: boolean };

/** Node's process warnings when there is a `process` (Node, Bun, Deno), the console elsewhere. */
function emitDefault(warning: SluiceWarning): void {
  const host = (globalThis as { process?: { emitWarning?: unknown } }).process;
  if (typeof host?.emitWarning === 'function') {
    (host.emitWarning as (message: string, options: { type: string; code: string }) => void)(
      warning.message,
      { type: 'SluiceWarning', code: warning.code },
    );
  } else {
    console.warn(`SluiceWarning [${warning.code}]: ${warning.message}`);
  }
}

/** The warnings one middleware still may give: each code at most once. */
export class Warnings {
  readonly #pending: Set<WarningCode>;
  readonly #emit: (warning: SluiceWarning) => void;

  constructor(pending: Iterable<WarningCode>, emit: (warning: SluiceWarning) => void) {
    this.#pending = new Set(pending);
    this.#emit = emit;
  }

  /** Whether some warning may still be given; once none can, requests are no longer inspected. */
  get active(): boolean {
    return this.#pending.size > 0;
  }

  /** Gives a warning, unless its code is off or was given already. */
  give(warning: SluiceWarning | undefined): void {
    if (warning === undefined || !this.#pending.delete(warning.code)) return;
    this.#emit(warning);
  }
}

/** The `warnings` and `onWarning` options, validated. */
export function resolveWarnings(option: unknown, onWarning: unknown): Warnings {
  if (onWarning !== undefined && typeof onWarning !== 'function') {
    throw invalidOption('onWarning', 'a function', onWarning);
  }
  const emit = (onWarning as ((warning: SluiceWarning) => void) | undefined) ?? emitDefault;
  if (option === undefined || option === true) return new Warnings(ALL_CODES, emit);
  if (option === false) return new Warnings([], emit);
  if (typeof option !== 'object' || option === null || Array.isArray(option)) {
    throw invalidOption('warnings', 'true, false, or an object of codes to turn off', option);
  }
  const settings = option as Record<string, unknown>;
  for (const [code, value] of Object.entries(settings)) {
    if (!ALL_CODES.includes(code as WarningCode) || typeof value !== 'boolean') {
      throw invalidOption(`warnings.${code}`, `a boolean for one of ${ALL_CODES.join(', ')}`, value);
    }
  }
  return new Warnings(
    ALL_CODES.filter((code) => settings[code] !== false),
    emit,
  );
}
