// The middleware's `allow` and `deny` options: identifiers and address ranges, matched against a request's keys.
import { invalidOption } from '../errors.js';
import { type Cidr, cidrContains, parseCidr } from './ip.js';

/** What a list says of a request: not limited (`allow`), refused (`deny`), or nothing. */
export type Listed = 'allow' | 'deny' | undefined;

/** One list: exact identifiers, and ranges that contain address keys. */
interface List {
  readonly identifiers: ReadonlySet<string>;
  readonly ranges: readonly Cidr[];
}

/** Text that means a range (`10.0.0.0/8`, `2001:db8::/32`): refused when malformed, never taken as an identifier. */
const RANGE_LIKE = /^[0-9a-fA-F:.]+\/\d+$/;

function listOption(option: string, value: unknown): List | undefined {
  if (value === undefined) return undefined;
  const expected =
    'an array of identifiers, addresses and CIDR ranges (such as 192.0.2.0/24 or 2001:db8::/48)';
  if (!Array.isArray(value)) throw invalidOption(option, expected, value);
  const identifiers = new Set<string>();
  const ranges: Cidr[] = [];
  for (const [i, entry] of value.entries()) {
    if (typeof entry !== 'string' || entry === '')
      throw invalidOption(`${option}[${i}]`, 'a non-empty string', entry);
    const range = parseCidr(entry);
    if (range !== undefined) ranges.push(range);
    else if (RANGE_LIKE.test(entry))
      throw invalidOption(`${option}[${i}]`, 'a CIDR range such as 10.0.0.0/8', entry);
    // Exactly as written too: a key function may return the text itself.
    identifiers.add(entry);
  }
  return { identifiers, ranges };
}

/**
 * Whether a key is on a list: written there as it is, or an address (or an address key's network,
 * `2001:db8:0:1200::/56`) inside one of its ranges. A network wider than the range (a /56 key, a /64
 * range) is not inside it: the key does not say which of its addresses sent the request.
 */
function onList(list: List, key: string, parsed: () => Cidr | undefined): boolean {
  if (list.identifiers.has(key)) return true;
  if (list.ranges.length === 0) return false;
  const network = parsed();
  if (network === undefined) return false;
  return list.ranges.some((range) => range.prefix <= network.prefix && cidrContains(range, network));
}

/**
 * The two lists, resolved once. `match` looks at every identifier of a request (one per limiter when
 * the key gives several): one on the allow list lets the request through uncounted, whatever the
 * deny list says (a wide deny with narrow exceptions); otherwise one on the deny list refuses it.
 */
export class AccessLists {
  readonly #allow: List | undefined;
  readonly #deny: List | undefined;

  constructor(allow: List | undefined, deny: List | undefined) {
    this.#allow = allow;
    this.#deny = deny;
  }

  match(identifiers: string | readonly string[]): Listed {
    const keys = typeof identifiers === 'string' ? [identifiers] : identifiers;
    let denied = false;
    for (const key of keys) {
      let network: Cidr | undefined | null = null;
      // Parsed once per key, and only when a list has ranges.
      const parsed = (): Cidr | undefined => {
        if (network === null) network = /[.:]/.test(key) ? parseCidr(key) : undefined;
        return network;
      };
      if (this.#allow !== undefined && onList(this.#allow, key, parsed)) return 'allow';
      if (this.#deny !== undefined && onList(this.#deny, key, parsed)) denied = true;
    }
    return denied ? 'deny' : undefined;
  }
}

/** The `allow` and `deny` options, validated; undefined when neither is given. */
export function resolveLists(allow: unknown, deny: unknown): AccessLists | undefined {
  const allowList = listOption('allow', allow);
  const denyList = listOption('deny', deny);
  if (allowList === undefined && denyList === undefined) return undefined;
  return new AccessLists(allowList, denyList);
}
