// Finds the rule a descriptor's entries select, as the reference does: key_value, then a wildcard, then key alone.
import { createHash } from 'node:crypto';
import type { Level, Rule } from './config.js';

/** One entry of a descriptor, as Envoy sends it. */
export interface Entry {
  readonly key: string;
  readonly value: string;
}

/** The rule a descriptor selected, and the names it is counted and reported under. */
export interface Match {
  readonly rule: Rule;
  /**
   * The reference's stats key without the domain, one part per level: the rule's final keys, or the
   * request's entries with `detailed_metric` (and its values with `value_to_metric`).
   */
  readonly statsParts: readonly string[];
  /** Whose quota: the descriptor's entries (a `share_threshold` entry by its pattern), one-to-one. */
  readonly identifier: string;
}

/**
 * Whether `value` matches a pattern split on `*` (each `*` matches any run, the empty one too):
 * the first part is a prefix, the last a suffix, and the middle parts occur in order between them.
 */
export function wildcardMatch(parts: readonly string[], value: string): boolean {
  if (parts.length === 1) return parts[0] === value;
  const first = parts[0] as string;
  const last = parts[parts.length - 1] as string;
  if (!value.startsWith(first) || !value.endsWith(last)) return false;
  if (value.length < parts.reduce((sum, part) => sum + part.length, 0)) return false;
  let rest = value.slice(first.length, value.length - last.length);
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] as string;
    const at = rest.indexOf(part);
    if (at < 0) return false;
    rest = rest.slice(at + part.length);
  }
  return true;
}

/** The longest identifier kept as written; longer ones are hashed, so keys stay bounded whatever clients send. */
const MAX_IDENTIFIER_BYTES = 1024;
const ESCAPES = /[%&=]/g;
const NEEDS_ESCAPE = /[%&=]/;

function escapePart(text: string): string {
  // Most parts have nothing to escape: a test allocates nothing where a replace with a callback would.
  if (!NEEDS_ESCAPE.test(text)) return text;
  return text.replace(ESCAPES, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** The identifier of a descriptor's entries: `key=value&key2=value2`, escaped so no two lists share one. */
export function identifierOf(entries: readonly Entry[], patterns?: ReadonlyMap<number, string>): string {
  let text = '';
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] as Entry;
    const value = patterns?.get(i) ?? entry.value;
    text += `${i === 0 ? '' : '&'}${escapePart(entry.key)}=${escapePart(value)}`;
  }
  if (text.length * 3 > MAX_IDENTIFIER_BYTES && Buffer.byteLength(text) > MAX_IDENTIFIER_BYTES) {
    return `sha256:${createHash('sha256').update(text).digest('base64url')}`;
  }
  return text;
}

/** The parts of the reference's key of a descriptor as sent: `key_value`, `key2` (a value left out when empty). */
export function descriptorParts(entries: readonly Entry[]): string[] {
  return entries.map((entry) => (entry.value === '' ? entry.key : `${entry.key}_${entry.value}`));
}

/**
 * The rule for a descriptor's entries in a domain, or undefined. Each entry descends one level; a
 * rule applies only when it sits at the depth of the last entry (a request with more entries than
 * the config has levels matches nothing).
 */
export function matchDescriptor(root: Level, entries: readonly Entry[]): Match | undefined {
  let level = root;
  let found: Rule | undefined;
  let patterns: Map<number, string> | undefined;
  // Sized once (a first push would reserve 17 places): filled to the last entry whenever a rule is found.
  const detailed: string[] = new Array(entries.length);
  const enhanced: string[] = new Array(entries.length);
  // Whether the enhanced key is the rules' own so far (each level's part against the rule matched there).
  let enhancedIsOwn = true;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i] as Entry;
    const keyValue = `${entry.key}_${entry.value}`;
    detailed[i] = keyValue;
    let next = level.byKey.get(keyValue);
    let wildcard: string | undefined;
    if (next === undefined) {
      for (const candidate of level.wildcards) {
        if (wildcardMatch(candidate.parts, keyValue)) {
          next = level.byKey.get(candidate.finalKey);
          wildcard = candidate.finalKey;
          break;
        }
      }
    }
    const byValue = next !== undefined;
    if (next === undefined) next = level.byKey.get(entry.key);
    let shownValue = '';
    if (next !== undefined) {
      if (wildcard !== undefined) {
        const pattern = wildcard.slice(entry.key.length + 1);
        if (next.shareThreshold) {
          patterns ??= new Map();
          patterns.set(i, pattern);
        }
        shownValue = next.valueToMetric && !next.shareThreshold ? entry.value : pattern;
      } else if (byValue || next.valueToMetric) shownValue = entry.value;
    }
    const enhancedPart = shownValue === '' ? entry.key : `${entry.key}_${shownValue}`;
    enhanced[i] = enhancedPart;
    enhancedIsOwn &&= enhancedPart === next?.finalKey;
    if (next?.limit !== undefined && i === entries.length - 1) found = next;
    if (next === undefined || next.level.byKey.size === 0) break;
    level = next.level;
  }
  if (found === undefined) return undefined;
  let statsParts = found.parts;
  if (found.detailedMetric) {
    statsParts =
      patterns === undefined
        ? detailed
        : entries.map((entry, i) => {
            const value = patterns?.get(i) ?? entry.value;
            return value === '' ? entry.key : `${entry.key}_${value}`;
          });
  } else if (!enhancedIsOwn) statsParts = enhanced;
  return { rule: found, statsParts, identifier: identifierOf(entries, patterns) };
}
