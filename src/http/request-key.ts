// Whose quota a request uses: its identifiers (one, or one per limiter) and tag, as the options say, checked.
import { ERROR_CODES, SluiceError } from '../errors.js';
import { isKeyExtractor } from './client-key.js';
import type { ResolvedOptions } from './options.js';
import type { RequestView } from './view.js';

/** The identifier shared by every request that carries no usable key (with `missingKey: 'shared'`). */
export const UNKNOWN_KEY = '(unknown)';

const MAX_KEY_BYTES = 1024;

/** A request's identifiers, ready for the limiters. */
export interface RequestKey {
  /** One identifier for every limiter, or one per limiter in order. */
  readonly identifiers: string | readonly string[];
  /** The identifiers as one string, joined by spaces: for penalties, messages and the handler. */
  readonly key: string;
  readonly tag: string | undefined;
}

/** No usable key, and `missingKey: 'deny'`: what the key was to come from, for the 400's message. */
export interface MissingKey {
  readonly missing: string;
}

function usableKey(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  if (value.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(value) > MAX_KEY_BYTES) return undefined;
  return value;
}

/** One usable identifier for every limiter, one per limiter, or undefined when any is missing. */
function usableKeys(value: unknown, count: number): string | readonly string[] | undefined {
  if (!Array.isArray(value)) return usableKey(value);
  if (value.length !== count) return undefined;
  const keys = value.map(usableKey);
  return keys.includes(undefined) ? undefined : (keys as string[]);
}

function noAddress(): SluiceError {
  return new SluiceError(
    ERROR_CODES.NO_CLIENT_ADDRESS,
    "The request carries no client address, so the default key (clientIp()) cannot tell clients apart: every client would share one bucket. Pass `remoteAddress` (the runtime's peer address, e.g. Deno's info.remoteAddr.hostname, Bun's server.requestIP(request)?.address, Hono's getConnInfo(c).remote.address) or a `key` such as headerKey('x-api-key'); or set missingKey: 'deny' to answer such requests with 400.",
  );
}

/**
 * The identifiers of a request for a group of `count` limiters. Gives the configuration's
 * warnings a look at the request while some may still be given. Rejects with
 * ERR_SLUICE_NO_CLIENT_ADDRESS when keying by address in a runtime that gave none.
 */
export async function requestKey<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  view: RequestView,
  count: number,
): Promise<RequestKey | MissingKey> {
  const source = config.key;
  let extracted: unknown;
  if (isKeyExtractor(source)) {
    if (config.warnings.active && source.diagnose !== undefined) config.warnings.give(source.diagnose(view));
    if (
      source.needsAddress === true &&
      view.remoteAddress === undefined &&
      config.addressRequired &&
      config.missingKey === 'shared'
    ) {
      throw noAddress();
    }
    extracted = source.extract(view);
  } else {
    extracted = await source(request);
  }
  let identifiers = usableKeys(extracted, count);
  if (identifiers === undefined) {
    if (config.missingKey === 'deny') {
      return { missing: isKeyExtractor(source) ? source.description : 'key function' };
    }
    identifiers = UNKNOWN_KEY;
  }
  const tag = typeof config.tag === 'function' ? await config.tag(request) : config.tag;
  const key = typeof identifiers === 'string' ? identifiers : identifiers.join(' ');
  return { identifiers, key, tag };
}
