// Client keys: the client's IP (through trusted proxies only), a header, or the caller's function.
import { invalidOption } from '../errors.js';
import { knownKeys, optionsObject } from '../validate.js';
import {
  type Address,
  addressKey,
  type Cidr,
  cidrContains,
  NAMED_RANGES,
  parseAddress,
  parseCidr,
} from './ip.js';
import type { RequestView } from './view.js';

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
}

/** The resolved trust rule. */
type Trust =
  | { readonly mode: 'none' }
  | { readonly mode: 'hops'; readonly hops: number }
  | { readonly mode: 'list'; readonly ranges: readonly Cidr[] };

const CLIENT_IP_KEYS = ['trustProxy', 'proxyHeader', 'ipv6Prefix', 'ipv4Prefix'] as const;

function prefixOption(option: string, value: unknown, fallback: number, max: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > max) {
    throw invalidOption(option, `an integer from 1 to ${max}`, value);
  }
  return value;
}

function resolveTrust(value: unknown): Trust {
  if (value === undefined || value === false || value === 0) return { mode: 'none' };
  if (typeof value === 'number') {
    if (!Number.isInteger(value) || value < 0 || value > 100) {
      throw invalidOption(
        'trustProxy',
        'false, a number of hops from 0 to 100, or a list of addresses',
        value,
      );
    }
    return { mode: 'hops', hops: value };
  }
  if (!Array.isArray(value)) {
    throw invalidOption(
      'trustProxy',
      'false, a number of hops, or a list of addresses and CIDR ranges',
      value,
    );
  }
  const ranges: Cidr[] = [];
  for (const [index, entry] of value.entries()) {
    const texts = typeof entry === 'string' ? (NAMED_RANGES[entry] ?? [entry]) : [];
    const parsed = texts.map((text) => parseCidr(text));
    if (texts.length === 0 || parsed.some((range) => range === undefined)) {
      throw invalidOption(
        `trustProxy[${index}]`,
        'an IP address, a CIDR range such as 10.0.0.0/8, or loopback, linklocal, uniquelocal',
        entry,
      );
    }
    ranges.push(...(parsed as Cidr[]));
  }
  return ranges.length === 0 ? { mode: 'none' } : { mode: 'list', ranges };
}

/** Splits on commas outside double quotes (Forwarded values may quote `[v6]:port`). */
function splitOutsideQuotes(text: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const char = text[i] as string;
    if (char === '"') quoted = !quoted;
    if (char === '\\' && quoted) {
      current += char + (text[i + 1] ?? '');
      i++;
      continue;
    }
    if (char === separator && !quoted) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts;
}

/** An address as proxies write it: bare, `[v6]`, `[v6]:port` or `v4:port`. */
function parseNode(text: string): Address | undefined {
  const node = text.trim();
  if (node.startsWith('[')) {
    const close = node.indexOf(']');
    const rest = node.slice(close + 1);
    if (close === -1 || (rest !== '' && !/^:\d{1,5}$/.test(rest))) return undefined;
    return parseAddress(node.slice(1, close));
  }
  const portAt = node.lastIndexOf(':');
  if (portAt !== -1 && node.indexOf(':') === portAt && /^\d{1,5}$/.test(node.slice(portAt + 1))) {
    return parseAddress(node.slice(0, portAt));
  }
  return parseAddress(node);
}

/** The `for=` node of each element of a Forwarded header (RFC 7239), left to right. */
function forwardedFor(value: string): Array<Address | undefined> {
  return splitOutsideQuotes(value, ',').map((element) => {
    for (const pair of splitOutsideQuotes(element, ';')) {
      const equals = pair.indexOf('=');
      if (equals === -1 || pair.slice(0, equals).trim().toLowerCase() !== 'for') continue;
      let node = pair.slice(equals + 1).trim();
      if (node.startsWith('"') && node.endsWith('"') && node.length >= 2) {
        node = node.slice(1, -1).replace(/\\(.)/g, '$1');
      }
      return parseNode(node);
    }
    return undefined;
  });
}

/** The proxies' list of addresses, left (furthest) to right (nearest); unparsable entries are `undefined`. */
function proxyChain(view: RequestView, header: 'x-forwarded-for' | 'forwarded'): Array<Address | undefined> {
  const value = view.header(header);
  if (value === undefined || value.trim() === '') return [];
  if (header === 'forwarded') return forwardedFor(value);
  return value.split(',').map(parseNode);
}

/**
 * The client's address as the trust rule allows: the socket's peer unless it is a trusted proxy,
 * then each trusted hop's claim in turn. A claim that does not parse where the client should be
 * gives `undefined` (no usable key), never a fallback to some other address.
 */
function clientAddress(
  view: RequestView,
  trust: Trust,
  header: 'x-forwarded-for' | 'forwarded',
): Address | undefined {
  const peer = view.remoteAddress === undefined ? undefined : parseAddress(view.remoteAddress);
  if (peer === undefined || trust.mode === 'none') return peer;
  const chain = proxyChain(view, header);
  if (trust.mode === 'hops') {
    // The peer is hop 1; entry `length - hops` was written by the last trusted hop. With fewer
    // entries than hops the request came through fewer proxies: the furthest claim is the client.
    if (chain.length === 0) return peer;
    return chain[Math.max(0, chain.length - trust.hops)];
  }
  let current: Address | undefined = peer;
  for (let index = chain.length - 1; index >= 0; index--) {
    if (!trust.ranges.some((range) => cidrContains(range, current as Address))) return current;
    current = chain[index];
    if (current === undefined) return undefined;
  }
  return current;
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
    extract(view: RequestView): string | undefined {
      const address = clientAddress(view, trust, header);
      return address === undefined ? undefined : addressKey(address, ipv4Prefix, ipv6Prefix);
    },
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
