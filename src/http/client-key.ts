// Client keys: the client's IP (through trusted proxies only), a header, or the caller's function.
import { invalidOption } from '../errors.js';
import { knownKeys, optionsObject } from '../validate.js';
import { addressKey } from './ip.js';
import { clientAddress, proxyWarning, resolveTrust } from './proxy.js';
import type { RequestView } from './view.js';
import type { SluiceWarning } from './warnings.js';

/** Options of {@link clientIp}. */
export interface ClientIpOptions {
  /**
   * Which proxies may tell the client's address. `false`: none; the socket's peer is the client and
   * any `X-Forwarded-For` is ignored. A number: that many proxies in front of the app (the socket's
   * peer is the first), so the address that many hops from the right of the header is the client.
   * A list: addresses, CIDR ranges and the names `loopback`, `linklocal`, `uniquelocal`; the
   * right-most address outside the list is the client.
   * @default false
   */
  readonly trustProxy?: false | number | readonly string[];
  /**
   * The header the trusted proxies write. Only this one is read: a client could send the other.
   * @default 'x-forwarded-for'
   */
  readonly proxyHeader?: 'x-forwarded-for' | 'forwarded';
  /**
   * IPv6 clients usually hold a whole /56 or /64, so each address of one prefix shares one key.
   * @default 56
   */
  readonly ipv6Prefix?: number;
  /**
   * The same for IPv4; 32 keys each address on its own.
   * @default 32
   */
  readonly ipv4Prefix?: number;
}

/**
 * A built-in key extractor. It reads only the framework-free view of a request, so one extractor
 * works under every adapter. Returns `undefined` when the request carries no usable key.
 */
export interface KeyExtractor {
  readonly kind: 'sluice-key-extractor';
  /** What it keys by, for messages: `client IP`, `header x-api-key`. */
  readonly description: string;
  extract(view: RequestView): string | undefined;
  /**
   * Whether it keys by the peer's address, so that a request without one (a fetch runtime that
   * was not asked for it) is a configuration error rather than one bucket shared by everyone.
   */
  readonly needsAddress?: boolean;
  /** What looks misconfigured in this request, if anything (see the middleware's `warnings`). */
  diagnose?(view: RequestView): SluiceWarning | undefined;
}

const CLIENT_IP_KEYS = ['trustProxy', 'proxyHeader', 'ipv6Prefix', 'ipv4Prefix'] as const;

function prefixOption(option: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalidOption(option, `an integer from 1 to ${max}`, value);
  }
  return value;
}

/**
 * Keys by the client's IP address. IPv6 addresses are grouped by `ipv6Prefix` (a /56 by default),
 * IPv4-mapped IPv6 counts as IPv4, and proxy headers are believed only from trusted proxies.
 *
 * @example
 * // Behind one load balancer that appends to X-Forwarded-For:
 * rateLimit({ limiter, key: clientIp({ trustProxy: 1 }) });
 * // Behind proxies in known ranges, with the standard Forwarded header:
 * rateLimit({ limiter, key: clientIp({ trustProxy: ['10.0.0.0/8', 'loopback'], proxyHeader: 'forwarded' }) });
 */
export function clientIp(options?: ClientIpOptions): KeyExtractor {
  const raw = optionsObject('clientIp options', options, false);
  knownKeys('clientIp', raw, CLIENT_IP_KEYS);
  const trust = resolveTrust(raw.trustProxy);
  const header = raw.proxyHeader ?? 'x-forwarded-for';
  if (header !== 'x-forwarded-for' && header !== 'forwarded') {
    throw invalidOption('proxyHeader', "'x-forwarded-for' or 'forwarded'", header);
  }
  const ipv6Prefix = prefixOption('ipv6Prefix', raw.ipv6Prefix, 56, 128);
  const ipv4Prefix = prefixOption('ipv4Prefix', raw.ipv4Prefix, 32, 32);
  return Object.freeze({
    kind: 'sluice-key-extractor' as const,
    description: 'client IP',
    needsAddress: true,
    extract(view: RequestView): string | undefined {
      const address = clientAddress(view, trust, header);
      return address === undefined ? undefined : addressKey(address, ipv4Prefix, ipv6Prefix);
    },
    diagnose: (view: RequestView) => proxyWarning(view, trust, header),
  });
}

/**
 * Keys by a request header such as `x-api-key` (trimmed; empty means no key). Combine it with
 * authentication: an unchecked header lets a client pick any bucket, including a fresh one.
 *
 * @example
 * rateLimit({ limiter, key: headerKey('x-api-key'), missingKey: 'deny' });
 */
export function headerKey(name: string): KeyExtractor {
  if (typeof name !== 'string' || !/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name)) {
    throw invalidOption('headerKey name', 'an HTTP header name such as x-api-key', name);
  }
  const lower = name.toLowerCase();
  return Object.freeze({
    kind: 'sluice-key-extractor' as const,
    description: `header ${lower}`,
    extract(view: RequestView): string | undefined {
      const value = view.header(lower)?.trim();
      return value === undefined || value === '' ? undefined : value;
    },
  });
}

/** Whether a value is one of the built-in extractors. */
export function isKeyExtractor(value: unknown): value is KeyExtractor {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as Partial<KeyExtractor>).kind === 'sluice-key-extractor' &&
    typeof (value as Partial<KeyExtractor>).extract === 'function'
  );
}
