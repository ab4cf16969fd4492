// A request's descriptors resolved against the config: which limit applies, whose quota, how many hits, which rule.
import type { Rule } from './config.js';
import type { AppliedLimit, RuleLimiters } from './limiters.js';
import { descriptorParts, identifierOf, matchDescriptor } from './match.js';
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

const NOTHING: readonly string[] = [];

/** Resolves one descriptor: an override, a matching rule, or nothing to count. */
export function resolveDescriptor(
  resolver: Resolver,
  descriptor: DescriptorMessage,
  index: number,
  requestHits: number | undefined,
): ResolvedDescriptor {
  const { domain, root, limiters, globalQuota } = resolver;
  const hits = hitsOf(descriptor, requestHits);
  // An unknown domain limits nothing, even with an override, as in the reference.
  if (root === undefined) return nothingToCount(index, domain, hits, globalQuota);
  const entries = descriptor.entries ?? [];
  const override = descriptor.limit;
  const match = entries.length === 0 ? undefined : matchDescriptor(root, entries);
  const unit = override === undefined || override === null ? undefined : overrideUnit(override.unit ?? 0);
  if (override !== undefined && override !== null && unit !== undefined) {
    // Envoy's override from route metadata replaces the rule's limit, its shadow and quota modes.
    return {
      index,
      domain,
      applied: limiters.forOverride(domain, match?.rule, override.requests_per_unit ?? 0, unit),
      unlimited: false,
      rule: undefined,
      statsParts: descriptorParts(entries),
      identifier: identifierOf(entries),
      hits,
      shadow: false,
      quota: globalQuota,
    };
  }
  if (match === undefined) return nothingToCount(index, domain, hits, globalQuota);
  const rule = match.rule;
  // One object per descriptor, in the same shape on every path.
  return {
    index,
    domain,
    applied: limiters.forRule(rule),
    unlimited: rule.limit?.unlimited === true,
    rule,
    statsParts: match.statsParts,
    identifier: match.identifier,
    hits,
    shadow: rule.shadowMode,
    quota: globalQuota || rule.quotaMode,
  };
}

/** A descriptor with nothing to count: no rule matched, or its domain is unknown. */
function nothingToCount(index: number, domain: string, hits: number, quota: boolean): ResolvedDescriptor {
  return {
    index,
    domain,
    applied: undefined,
    unlimited: false,
    rule: undefined,
    statsParts: NOTHING,
    identifier: '',
    hits,
    shadow: false,
    quota,
  };
}

/** The descriptors whose limit applies: those with one, less those another matched limit `replaces`. */
export function liveDescriptors(slots: readonly ResolvedDescriptor[]): readonly ResolvedDescriptor[] {
  let replaced: Set<string> | undefined;
  let allApplied = true;
  for (let i = 0; i < slots.length; i++) {
    const slot = slots[i] as ResolvedDescriptor;
    if (slot.applied === undefined) allApplied = false;
    const names = slot.rule?.limit?.replaces;
    if (names === undefined || names.length === 0) continue;
    replaced ??= new Set();
    for (const name of names) replaced.add(name);
  }
  // The usual request: every descriptor has a limit and none replaces another's, so all are live.
  if (allApplied && replaced === undefined) return slots;
  return slots.filter(
    (slot) =>
      slot.applied !== undefined &&
      !(replaced !== undefined && slot.applied.name !== '' && replaced.has(slot.applied.name)),
  );
}
