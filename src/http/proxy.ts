// Proxies: the trust rule, the addresses proxies write (X-Forwarded-For, Forwarded), the client's address, and what looks misconfigured.
import { invalidOption } from '../errors.js';
import {
  type Address,
  type Cidr,
  cidrContains,
  formatAddress,
  NAMED_RANGES,
  parseAddress,
  parseCidr,
} from './ip.js';
import type { RequestView } from './view.js';
import { type SluiceWarning, WARNING_CODES } from './warnings.js';

/** The header trusted proxies write. */
export type ProxyHeader = 'x-forwarded-for' | 'forwarded';

/** The resolved trust rule. */
export type Trust =
  | { readonly mode: 'none' }
  | { readonly mode: 'hops'; readonly hops: number }
  | { readonly mode: 'list'; readonly ranges: readonly Cidr[] };

export function resolveTrust(value: unknown): Trust {
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
export function proxyChain(view: RequestView, header: ProxyHeader): Array<Address | undefined> {
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
export function clientAddress(view: RequestView, trust: Trust, header: ProxyHeader): Address | undefined {
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

/** Addresses no client on the internet has: where a proxy you run would sit. */
const PRIVATE_RANGES: readonly Cidr[] = [
  ...(NAMED_RANGES.loopback ?? []),
  ...(NAMED_RANGES.linklocal ?? []),
  ...(NAMED_RANGES.uniquelocal ?? []),
].map((text) => parseCidr(text) as Cidr);

const TURN_OFF = 'Turn this warning off with the option `warnings: { CODE: false }`.';

/**
 * What looks misconfigured in a request, if anything: a private peer sending proxy headers while
 * no proxy is trusted, or fewer proxy hops than `trustProxy` counts on. Lists of trusted ranges
 * are not judged: a trusted peer without the header is often a health check.
 */
export function proxyWarning(
  view: RequestView,
  trust: Trust,
  header: ProxyHeader,
): SluiceWarning | undefined {
  if (trust.mode === 'list' || view.remoteAddress === undefined) return undefined;
  if (trust.mode === 'none') {
    // Headers first: on the usual request, without them, nothing else is looked at.
    const sent = (['x-forwarded-for', 'forwarded'] as const).find(
      (name) => (view.header(name) ?? '').trim() !== '',
    );
    if (sent === undefined) return undefined;
    const peer = parseAddress(view.remoteAddress);
    if (peer === undefined || !PRIVATE_RANGES.some((range) => cidrContains(range, peer))) return undefined;
    const code = WARNING_CODES.FORWARDED_UNTRUSTED;
    return {
      code,
      message: `A request from ${formatAddress(peer)}, a private or loopback address, carries ${sent} while clientIp() trusts no proxy: if a proxy you run is in front of the app, every client behind it shares the proxy's bucket. Set clientIp({ trustProxy }) to the number of proxies in front (or their addresses). ${TURN_OFF.replace('CODE', code)}`,
    };
  }
  const hops = proxyChain(view, header).length;
  if (hops >= trust.hops) return undefined;
  const peer = view.remoteAddress;
  const code = WARNING_CODES.PROXY_HOPS_MISSING;
  return {
    code,
    message: `clientIp({ trustProxy: ${trust.hops} }) trusts ${trust.hops} proxies, but a request from ${peer} carries ${hops} address${hops === 1 ? '' : 'es'} in ${header}: the ${hops === 0 ? "peer's address (a proxy's, or a client's that reached the app directly)" : 'furthest address, which the client may have written itself,'} was taken as the client's. Set trustProxy to the number of proxies every request passes through. ${TURN_OFF.replace('CODE', code)}`,
  };
}
