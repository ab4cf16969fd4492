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
  if (tag === undefined) return `${prefix}:${name}:{${escapeIdentifier(identifier)}}`;
  return `${prefix}:${name}:{${escapeIdentifier(tag)}}:${escapeIdentifier(identifier)}`;
}
