// The most work one ShouldRateLimit call may ask: its size, its descriptors, their entries; past them, refused at once.
import { MAX_GROUP_SIZE } from 'sluice/internal';
import { type RateLimitRequestMessage, RequestRefused } from './messages.js';

/** The bounds of one call, each with its flag. */
export interface EnvoyBounds {
  /**
   * The largest request, in bytes: a gRPC message (checked before it is decoded) or a POST /json
   * body. Envoy's requests are a few hundred bytes; 64 KiB leaves room for the most descriptors
   * and entries below with long header values. `--envoy-max-message-bytes`.
   * @default 65536
   */
  readonly maxMessageBytes: number;
  /**
   * The most descriptors in one request. Envoy sends one per `rate_limits` action that applies, a
   * handful per request; 64 is also the most one group decides in one script. `--envoy-max-descriptors`.
   * @default 64
   */
  readonly maxDescriptors: number;
  /**
   * The most entries in one descriptor: one per action of a `rate_limits` entry, matched one config
   * level each; configs nest a few levels. `--envoy-max-entries`.
   * @default 32
   */
  readonly maxEntries: number;
}

export const DEFAULT_BOUNDS: EnvoyBounds = { maxMessageBytes: 65_536, maxDescriptors: 64, maxEntries: 32 };

/** The largest values the flags take: a group's size for descriptors, gRPC servers' usual 4 MiB for messages. */
export const BOUND_MAXIMUMS: EnvoyBounds = {
  maxMessageBytes: 4 * 1024 * 1024,
  maxDescriptors: MAX_GROUP_SIZE,
  maxEntries: 1024,
};

/** A refusal naming the bound and the flag that raises it. */
function pastBound(what: string, bound: number, flag: string): RequestRefused {
  return new RequestRefused('INVALID_ARGUMENT', `${what}; at most ${bound} are taken (--${flag})`);
}

/** The refusal of a message over the size bound, before it is decoded (`bytes` undefined: over, read no further). */
export function messageTooLarge(bytes: number | undefined, bounds: EnvoyBounds): RequestRefused {
  const size = bytes === undefined ? `over ${bounds.maxMessageBytes}` : String(bytes);
  return pastBound(`the request is ${size} bytes`, bounds.maxMessageBytes, 'envoy-max-message-bytes');
}

/** Refuses a request with more descriptors, or a descriptor with more entries, than the bounds take. */
export function checkBounds(request: RateLimitRequestMessage, bounds: EnvoyBounds): void {
  const descriptors = request.descriptors ?? [];
  if (descriptors.length > bounds.maxDescriptors) {
    throw pastBound(
      `rate limit descriptor list has ${descriptors.length} descriptors`,
      bounds.maxDescriptors,
      'envoy-max-descriptors',
    );
  }
  for (let i = 0; i < descriptors.length; i++) {
    const entries = descriptors[i]?.entries?.length ?? 0;
    if (entries > bounds.maxEntries) {
      throw pastBound(`descriptor ${i} has ${entries} entries`, bounds.maxEntries, 'envoy-max-entries');
    }
  }
}
