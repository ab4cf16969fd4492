// A request's descriptors resolved against the config: which limit applies, whose quota, how many hits, which rule.
import type { Rule } from './config.js';
import type { AppliedLimit, RuleLimiters } from './limiters.js';
import { descriptorParts, type Entry, identifierOf, matchDescriptor } from './match.js';
import type { DescriptorMessage } from './messages.js';
import { overrideUnit } from './units.js';

/** One descriptor, resolved against the config. */
export interface ResolvedDescriptor {
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

/** What a descriptor resolved to, besides its place, domain and hits (one shape for every slot). */
type Resolved = Pick<
  ResolvedDescriptor,
  'applied' | 'unlimited' | 'rule' | 'statsParts' | 'identifier' | 'shadow' | 'quota'
>;

const NOTHING: readonly string[] = [];

/** Resolves one descriptor: an override, a matching rule, or nothing to count. */
export function resolveDescriptor(
  resolver: Resolver,
  descriptor: DescriptorMessage,
  index: number,
  requestHits: number | undefined,
): ResolvedDescriptor {
  const { domain, globalQuota } = resolver;
  const resolved = resolveLimit(resolver, descriptor.entries ?? [], descriptor.limit);
  return {
    index,
    domain,
    applied: resolved?.applied,
    unlimited: resolved?.unlimited ?? false,
    rule: resolved?.rule,
    statsParts: resolved?.statsParts ?? NOTHING,
    identifier: resolved?.identifier ?? '',
    hits: hitsOf(descriptor, requestHits),
    shadow: resolved?.shadow ?? false,
    quota: resolved?.quota ?? globalQuota,
  };
}

/** The limit a descriptor's entries and override resolve to; undefined when there is nothing to count. */
function resolveLimit(
  resolver: Resolver,
  entries: readonly Entry[],
  override: DescriptorMessage['limit'],
): Resolved | undefined {
  const { domain, root, limiters, globalQuota } = resolver;
  // An unknown domain limits nothing, even with an override, as in the reference.
  if (root === undefined) return undefined;
  const match = entries.length === 0 ? undefined : matchDescriptor(root, entries);
  const unit = override === undefined || override === null ? undefined : overrideUnit(override.unit ?? 0);
  if (override !== undefined && override !== null && unit !== undefined) {
    // Envoy's override from route metadata replaces the rule's limit, its shadow and quota modes.
    return {
      applied: limiters.forOverride(domain, match?.rule, override.requests_per_unit ?? 0, unit),
      unlimited: false,
      rule: undefined,
      statsParts: descriptorParts(entries),
      identifier: identifierOf(entries),
      shadow: false,
      quota: globalQuota,
    };
  }
  if (match === undefined) return undefined;
  const rule = match.rule;
  return {
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
export function liveDescriptors(slots: readonly ResolvedDescriptor[]): ResolvedDescriptor[] {
  let replaced: Set<string> | undefined;
  for (const slot of slots) {
    const names = slot.rule?.limit?.replaces;
    if (names === undefined || names.length === 0) continue;
    replaced ??= new Set();
    for (const name of names) replaced.add(name);
  }
  return slots.filter(
    (slot) =>
      slot.applied !== undefined &&
      !(replaced !== undefined && slot.applied.name !== '' && replaced.has(slot.applied.name)),
  );
}
