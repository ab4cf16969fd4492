// A request's descriptors resolved against the config: which limit applies, whose quota, how many hits, which rule.
import type { Rule } from './config.js';
import type { AppliedLimit, RuleLimiters } from './limiters.js';
import { descriptorParts, type Entry, identifierOf, matchDescriptor } from './match.js';
import type { DescriptorMessage } from './messages.js';
import { overrideUnit } from './units.js';

/** One descriptor, resolved against the config. */
export interface Slot {
  readonly index: number;
  readonly domain: string;
  /** The limit that applies; undefined when none does (no match, unknown domain, unlimited). */
  readonly applied: AppliedLimit | undefined;
  readonly unlimited: boolean;
  readonly rule: Rule | undefined;
  readonly statsParts: readonly string[];
  readonly identifier: string;
  readonly hits: number;
  readonly shadow: boolean;
  /** Quota mode: over its limit, it makes the request over only when every quota-mode descriptor is. */
  readonly quota: boolean;
}

/** The config a request is resolved against. */
export interface Resolver {
  readonly domain: string;
  readonly root: Rule['level'] | undefined;
  readonly limiters: RuleLimiters;
  /** `--quota-mode`: every descriptor is in quota mode. */
  readonly globalQuota: boolean;
}

/** The hits a descriptor asks: its own `hits_addend` when set (even to 0), else the request's, else 1. */
function hitsOf(descriptor: DescriptorMessage, requestHits: number | undefined): number {
  const own = descriptor.hits_addend;
  if (own !== undefined && own !== null) return Number(own.value ?? 0);
  return Math.max(1, requestHits ?? 0);
}

/** Resolves one descriptor: an override, a matching rule, or nothing to count. */
export function resolveSlot(
  resolver: Resolver,
  descriptor: DescriptorMessage,
  index: number,
  requestHits: number | undefined,
): Slot {
  const { domain, root, limiters, globalQuota } = resolver;
  const entries: readonly Entry[] = descriptor.entries ?? [];
  const none: Slot = {
    index,
    domain,
    applied: undefined,
    unlimited: false,
    rule: undefined,
    statsParts: [],
    identifier: '',
    hits: hitsOf(descriptor, requestHits),
    shadow: false,
    quota: globalQuota,
  };
  // An unknown domain limits nothing, even with an override, as in the reference.
  if (root === undefined) return none;
  const match = entries.length === 0 ? undefined : matchDescriptor(root, entries);
  const override = descriptor.limit;
  const unit = override === undefined || override === null ? undefined : overrideUnit(override.unit ?? 0);
  if (override !== undefined && override !== null && unit !== undefined) {
    // Envoy's override from route metadata replaces the rule's limit, its shadow and quota modes.
    return {
      ...none,
      applied: limiters.forOverride(domain, match?.rule, override.requests_per_unit ?? 0, unit),
      statsParts: descriptorParts(entries),
      identifier: identifierOf(entries),
    };
  }
  if (match === undefined) return none;
  const rule = match.rule;
  return {
    ...none,
    applied: limiters.forRule(rule),
    unlimited: rule.limit?.unlimited === true,
    rule,
    statsParts: match.statsParts,
    identifier: match.identifier,
    shadow: rule.shadowMode,
    quota: globalQuota || rule.quotaMode,
  };
}

/** The descriptors whose limit applies: those with one, less those another matched limit `replaces`. */
export function liveSlots(slots: readonly Slot[]): Slot[] {
  const replaced = new Set(slots.flatMap((slot) => slot.rule?.limit?.replaces ?? []));
  return slots.filter(
    (slot) => slot.applied !== undefined && !(slot.applied.name !== '' && replaced.has(slot.applied.name)),
  );
}
