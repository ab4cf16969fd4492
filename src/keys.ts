// Key layout shared by every store: `<prefix>:<name>:{<identifier>}`, one hash tag per identifier.

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

/** The key of one identifier's state. The braces make all of an identifier's keys share a cluster slot. */
export function stateKey(prefix: string, name: string, identifier: string): string {
  return `${prefix}:${name}:{${escapeIdentifier(identifier)}}`;
}
