// Request classes from most to least important, and the share of the limit each may fill.
import { ERROR_CODES, invalidOption, SluiceError } from '../errors.js';
import { keyPart, knownKeys, optionsObject } from '../validate.js';

/** One request class: its name, and the fraction of the limit it keeps from every class below it. */
export interface PriorityClass {
  readonly name: string;
  /**
   * The fraction of the limit this class (with those above it) keeps from the classes below: with
   * `reserve: 0.2` on the first class, the others are refused once 80% of the limit is in flight.
   * Meaningless on the last class (nobody is below it).
   * @default 0
   */
  readonly reserve?: number;
}

/** The `priorities` option: names, or classes with their `reserve`, most important first. */
export type PrioritiesOption = readonly (string | PriorityClass)[];

/** Three classes: critical keeps 20% of the limit, default 10% more; sheddable is refused first. */
export const DEFAULT_PRIORITIES: PrioritiesOption = [
  { name: 'critical', reserve: 0.2 },
  { name: 'default', reserve: 0.1 },
  'sheddable',
];

/** A class after checks: its index (0 most important) and the share of the limit it may fill. */
export interface ResolvedPriority {
  readonly name: string;
  readonly index: number;
  /** `1 − (reserves of the classes above)`: the class is refused once in flight reaches `limit · share`. */
  readonly share: number;
}

/** Checks the classes and computes each one's share. */
export function resolvePriorities(value: unknown): readonly ResolvedPriority[] {
  const list = value ?? DEFAULT_PRIORITIES;
  if (!Array.isArray(list) || list.length === 0 || list.length > 16) {
    throw invalidOption('priorities', 'an array of 1 to 16 class names (or { name, reserve })', list);
  }
  const resolved: ResolvedPriority[] = [];
  let reserved = 0;
  for (const [index, entry] of (list as unknown[]).entries()) {
    const option = `priorities[${index}]`;
    const raw = typeof entry === 'string' ? { name: entry } : optionsObject(option, entry, true);
    knownKeys(option, raw, ['name', 'reserve']);
    const name = keyPart(`${option}.name`, raw.name);
    if (resolved.some((other) => other.name === name)) {
      throw invalidOption(`${option}.name`, 'a name no other class has', name);
    }
    const reserve = raw.reserve ?? 0;
    if (typeof reserve !== 'number' || !Number.isFinite(reserve) || reserve < 0 || reserve >= 1) {
      throw invalidOption(`${option}.reserve`, 'a fraction of the limit from 0 to 1 (excluded)', reserve);
    }
    resolved.push({ name, index, share: 1 - reserved });
    reserved += reserve;
    if (reserved >= 1 && index < list.length - 1) {
      throw new SluiceError(
        ERROR_CODES.INVALID_OPTION,
        `Expected the \`reserve\`s of \`priorities\` above the last class to add up to less than 1, got ${reserved} by \`${option}\`: the classes below would never run.`,
      );
    }
  }
  return resolved;
}

/** The class a request without a priority belongs to: 'default' when there is one, else the least important. */
export function defaultPriority(priorities: readonly ResolvedPriority[], given: unknown): ResolvedPriority {
  if (given !== undefined) {
    const found = priorities.find((priority) => priority.name === given);
    if (found === undefined) throw unknownPriority('defaultPriority', given, priorities);
    return found;
  }
  return (
    priorities.find((priority) => priority.name === 'default') ?? (priorities.at(-1) as ResolvedPriority)
  );
}

/** The error for a priority that names no class. */
export function unknownPriority(
  option: string,
  value: unknown,
  priorities: readonly ResolvedPriority[],
): SluiceError {
  return invalidOption(
    option,
    `one of the classes ${priorities.map((p) => `'${p.name}'`).join(', ')}`,
    value,
  );
}
