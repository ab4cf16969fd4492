// IP addresses as bytes: parsing (node:net validates), IPv4-mapped unwrapping, prefixes, CIDR matching.
import { isIP } from 'node:net';

/** An address as bytes: 4 for IPv4, 16 for IPv6. IPv4-mapped IPv6 is always unwrapped to 4 bytes. */
export interface Address {
  readonly version: 4 | 6;
  readonly bytes: readonly number[];
}

/** A range of addresses: the first `prefix` bits of `bytes` must match. */
export interface Cidr {
  readonly version: 4 | 6;
  readonly bytes: readonly number[];
  readonly prefix: number;
}

function parseIPv4(text: string): number[] {
  return text.split('.').map(Number);
}

function parseIPv6(text: string): number[] {
  // isIP has already accepted the text, so only the shapes of RFC 4291 section 2.2 remain.
  let head = text;
  let tail: number[] = [];
  const lastColon = head.lastIndexOf(':');
  if (head.includes('.', lastColon)) {
    // An embedded IPv4 tail (`::ffff:192.0.2.1`) stands for the last two groups.
    tail = parseIPv4(head.slice(lastColon + 1));
    head = `${head.slice(0, lastColon + 1)}0:0`;
  }
  const [left = '', right] = head.split('::');
  const groupsOf = (part: string): number[] =>
    part === '' ? [] : part.split(':').map((group) => Number.parseInt(group, 16));
  const leftGroups = groupsOf(left);
  const rightGroups = right === undefined ? [] : groupsOf(right);
  const zeros = new Array<number>(8 - leftGroups.length - rightGroups.length).fill(0);
  const groups = [...leftGroups, ...zeros, ...rightGroups];
  const bytes = groups.flatMap((group) => [group >> 8, group & 0xff]);
  if (tail.length === 4) bytes.splice(12, 4, ...tail);
  return bytes;
}

function isMappedIPv4(bytes: readonly number[]): boolean {
  for (let i = 0; i < 10; i++) if (bytes[i] !== 0) return false;
  return bytes[10] === 0xff && bytes[11] === 0xff;
}

/**
 * Parses an IPv4 or IPv6 address (an IPv6 zone such as `%eth0` is dropped). IPv4-mapped IPv6
 * (`::ffff:192.0.2.1`) comes back as the IPv4 address, so a dual-stack socket and an IPv4 proxy
 * header name the same client alike. Anything else, including `unknown` and ports, is `undefined`.
 */
export function parseAddress(text: string): Address | undefined {
  const zone = text.indexOf('%');
  const bare = zone === -1 ? text : text.slice(0, zone);
  const version = isIP(bare);
  if (version === 4) return { version: 4, bytes: parseIPv4(bare) };
  if (version !== 6) return undefined;
  const bytes = parseIPv6(bare);
  if (isMappedIPv4(bytes)) return { version: 4, bytes: bytes.slice(12) };
  return { version: 6, bytes };
}

/** Keeps the first `prefix` bits and zeroes the rest. */
export function maskBytes(bytes: readonly number[], prefix: number): number[] {
  return bytes.map((byte, index) => {
    const bitsHere = Math.min(8, Math.max(0, prefix - index * 8));
    return byte & ((0xff << (8 - bitsHere)) & 0xff);
  });
}

/** RFC 5952 text: lowercase hex, no leading zeros, the longest run of two or more zero groups as `::`. */
export function formatAddress(address: Address): string {
  if (address.version === 4) return address.bytes.join('.');
  const groups: number[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((address.bytes[i] ?? 0) << 8) | (address.bytes[i + 1] ?? 0));
  let bestStart = -1;
  let bestLength = 1;
  for (let start = 0; start < 8; ) {
    if (groups[start] !== 0) {
      start++;
      continue;
    }
    let end = start;
    while (end < 8 && groups[end] === 0) end++;
    if (end - start > bestLength) {
      bestStart = start;
      bestLength = end - start;
    }
    start = end;
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart === -1) return hex.join(':');
  const left = hex.slice(0, bestStart).join(':');
  const right = hex.slice(bestStart + bestLength).join(':');
  return `${left}::${right}`;
}

/**
 * The key of an address's group: the address itself at a full prefix, otherwise the masked network
 * with its length (`2001:db8:0:1200::/56`), so every address of one /56 shares one key.
 */
export function addressKey(address: Address, ipv4Prefix: number, ipv6Prefix: number): string {
  const prefix = address.version === 4 ? ipv4Prefix : ipv6Prefix;
  const full = address.version === 4 ? 32 : 128;
  if (prefix >= full) return formatAddress(address);
  return `${formatAddress({ version: address.version, bytes: maskBytes(address.bytes, prefix) })}/${prefix}`;
}

/** Ranges with a name, for `trustProxy: ['loopback', ...]`. */
export const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Parses `192.0.2.0/24`, `2001:db8::/32` or a single address (a full-length range). An IPv4-mapped
 * IPv6 range of at least /96 becomes the IPv4 range it covers. `undefined` when malformed.
 */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  const address = parseAddress(slash === -1 ? text : text.slice(0, slash));
  if (address === undefined) return undefined;
  const mapped = address.version === 4 && isIP(slash === -1 ? text : text.slice(0, slash)) === 6;
  const full = mapped ? 128 : address.version === 4 ? 32 : 128;
  let prefix = full;
  if (slash !== -1) {
    const digits = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(digits)) return undefined;
    prefix = Number(digits);
    if (prefix > full) return undefined;
  }
  if (mapped) {
    if (prefix < 96) return undefined;
    prefix -= 96;
  }
  return { version: address.version, bytes: maskBytes(address.bytes, prefix), prefix };
}

/** Whether `address` lies inside `range`. */
export function cidrContains(range: Cidr, address: Address): boolean {
  if (range.version !== address.version) return false;
  const masked = maskBytes(address.bytes, range.prefix);
  return masked.every((byte, index) => byte === range.bytes[index]);
}
