// Key layout shared by every store: `<prefix>:<name>:{<identifier>}`, one hash tag per identifier,
// or `<prefix>:<name>:{<tag>}:<identifier>` when a call names a tag shared with other keys.

const ESCAPES: Readonly<Record<string, string>> = { '{': '%7B', '}': '%7D', '%': '%25' };
const NEEDS_ESCAPE = /[{}%]/;
const ESCAPABLE = /[{}%]/g;

/**
 * Escapes the characters that would let an identifier choose another hash tag (`{`, `}`), and `%`
 * so that the escape stays one-to-one: no two identifiers share a key.
 */
export function escapeIdentifier(identifier: string): string {
  return NEEDS_ESCAPE.test(identifier)
    ? identifier.replace(ESCAPABLE, (c) => ESCAPES[c] as string)
    : identifier;
}

/**
 * The key of one identifier's state. The braces make all of an identifier's keys share a cluster
 * slot; with a `tag`, the tag is in the braces instead, so keys of different identifiers that name
 * the same tag share a slot and one script may decide them together. Both parts are escaped, so the
 * tag ends at the first `}` and tagged keys never equal untagged ones (which end with `}`).
 */
export function stateKey(prefix: string, name: string, identifier: string, tag?: string): string {
  // Most keys have no tag and nothing to escape: their part is `{<identifier>}` (see identifierPart).
  if (tag === undefined && !NEEDS_ESCAPE.test(identifier)) return `${prefix}:${name}:{${identifier}}`;
  return `${prefix}:${name}:${identifierPart(identifier, tag)}`;
}

/**
 * The part of an identifier's keys after `<prefix>:<name>:`: `{<identifier>}`, or
 * `{<tag>}:<identifier>`, both escaped. Also an identifier's member in a stored index.
 */
export function identifierPart(identifier: string, tag: string | undefined): string {
  if (tag === undefined) return `{${escapeIdentifier(identifier)}}`;
  return `{${escapeIdentifier(tag)}}:${escapeIdentifier(identifier)}`;
}

/** What an operator stores for one identifier of a limiter with `overrides`: its limit, or its denial. */
export type StoredKind = 'limit' | 'deny';

/**
 * The key of what is stored for an identifier: its state key with `%limit` or `%deny` appended, so
 * it shares the state's hash tag (one script reads both on one slot). No state key contains an
 * unescaped `%` followed by a letter, so these never equal a state key or each other.
 */
export function storedKey(
  prefix: string,
  name: string,
  identifier: string,
  tag: string | undefined,
  kind: StoredKind,
): string {
  return `${stateKey(prefix, name, identifier, tag)}%${kind}`;
}

/**
 * The index of what a limiter stores, one sorted set per kind (`<prefix>:<name>:%limit`), each
 * member an identifier's part of its keys (see {@link identifierPart}), scored by when it ends. It has no
 * `{`, so it is no state key; listing reads it instead of scanning the keyspace.
 */
export function storedIndexKey(prefix: string, name: string, kind: StoredKind): string {
  return `${prefix}:${name}:%${kind}`;
}

const UNESCAPES: Readonly<Record<string, string>> = { '%7B': '{', '%7D': '}', '%25': '%' };

function unescapeIdentifier(text: string): string {
  return text.replace(/%(?:7B|7D|25)/g, (sequence) => UNESCAPES[sequence] as string);
}

/** The identifier and tag of a stored index's member (see {@link identifierPart}), or undefined for one sluice did not write. */
export function parseStoredMember(
  member: string,
): { readonly identifier: string; readonly tag: string | undefined } | undefined {
  const tagged = /^\{([^{}]*)\}:([^{}]*)$/.exec(member);
  if (tagged !== null) {
    return {
      identifier: unescapeIdentifier(tagged[2] as string),
      tag: unescapeIdentifier(tagged[1] as string),
    };
  }
  const plain = /^\{([^{}]*)\}$/.exec(member);
  return plain === null ? undefined : { identifier: unescapeIdentifier(plain[1] as string), tag: undefined };
}
