// ShouldRateLimit, transport aside: match each descriptor, decide them together, answer as the reference does.
import { rateLimitHeaders } from '../http/headers.js';
import { type Decision, isStoreFailure, type Store } from '../types.js';
import type { EnvoyConfig, Level, Rule } from './config.js';
import { callOptions, type DescriptorCall, Together } from './decide.js';
import { type AppliedLimit, RuleLimiters } from './limiters.js';
import { descriptorParts, type Entry, identifierOf, matchDescriptor } from './match.js';
import {
  CODE,
  type DescriptorMessage,
  type DescriptorStatusMessage,
  type HeaderValueMessage,
  type RateLimitRequestMessage,
  type RateLimitResponseMessage,
  RequestRefused,
} from './messages.js';
import type { DescriptorOutcome, EnvoyMetrics } from './metrics.js';
import { overrideUnit, RESPONSE_UNIT } from './units.js';

const MAX_UINT32 = 4_294_967_295;

/** Options of {@link EnvoyService}. */
export interface EnvoyServiceOptions {
  readonly store: Store;
  /**
   * Whether the store is one shard (memory, one Redis, Sentinel): then every key of a domain shares
   * one hash tag and a request's descriptors are decided by one atomic script. On a Redis Cluster,
   * false: keys spread by identifier, descriptors decided side by side with refunds.
   */
  readonly oneShard: boolean;
  /** Answer OK whatever the limits say (they are still counted): `--shadow`. */
  readonly shadow: boolean;
  /** Put the IETF `RateLimit` / `RateLimit-Policy` fields in `response_headers_to_add`. */
  readonly headers: boolean;
  readonly metrics: EnvoyMetrics | undefined;
  /** One line for the log: the store failed, or answers again. */
  readonly log: (line: string) => void;
}

/** One descriptor, resolved against the config. */
interface Slot {
  readonly index: number;
  readonly domain: string;
  readonly applied: AppliedLimit | undefined;
  readonly unlimited: boolean;
  readonly rule: Rule | undefined;
  readonly statsParts: readonly string[];
  readonly identifier: string;
  readonly hits: number;
  readonly shadow: boolean;
  decision?: Decision | undefined;
  /** Over without asking the store: a quota of 0, or more hits than it can ever grant. */
  staticOver?: boolean;
}

/** The config in force and what was built from it; replaced whole on reload, so calls in flight keep theirs. */
interface Snapshot {
  readonly config: EnvoyConfig;
  readonly limiters: RuleLimiters;
  readonly together: Together;
}

/** Keeps a descriptor's decision once it is made. */
async function keep(slot: Slot, decision: Promise<Decision>): Promise<void> {
  slot.decision = await decision;
}

function hitsOf(descriptor: DescriptorMessage, requestHits: number | undefined): number {
  const own = descriptor.hits_addend;
  if (own !== undefined && own !== null) return Number(own.value ?? 0);
  return Math.max(1, requestHits ?? 0);
}

/** The Envoy rate limit service over sluice limiters. */
export class EnvoyService {
  readonly #options: EnvoyServiceOptions;
  #snapshot: Snapshot | undefined;
  #storeDown = false;

  constructor(options: EnvoyServiceOptions) {
    this.#options = options;
  }

  /** Whether a config is loaded (health answers NOT_SERVING until one is). */
  get loaded(): boolean {
    return this.#snapshot !== undefined;
  }

  get config(): EnvoyConfig | undefined {
    return this.#snapshot?.config;
  }

  /** Puts a config in force; its limiters are made here, once. */
  load(config: EnvoyConfig): void {
    const limiters = new RuleLimiters(config.rules, {
      store: this.#options.store,
      onError: (error) => {
        if (this.#storeDown) return;
        this.#storeDown = true;
        this.#options.log(
          `store failure: ${error.message}; rules answer by their on_store_error until the store is back`,
        );
      },
    });
    this.#snapshot = { config, limiters, together: new Together(this.#options.oneShard) };
  }

  /** Answers one request, or throws RequestRefused (answered as a gRPC status). */
  async shouldRateLimit(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage> {
    const domain = request.domain ?? '';
    if (domain === '') throw new RequestRefused('INVALID_ARGUMENT', 'rate limit domain must not be empty');
    const descriptors = request.descriptors ?? [];
    if (descriptors.length === 0) {
      throw new RequestRefused('INVALID_ARGUMENT', 'rate limit descriptor list must not be empty');
    }
    const snapshot = this.#snapshot;
    if (snapshot === undefined) throw new RequestRefused('UNAVAILABLE', 'no rate limit configuration loaded');
    const root = snapshot.config.domains.get(domain);
    const slots = descriptors.map((descriptor, index) =>
      this.#resolve(snapshot, domain, root, descriptor, index, request.hits_addend),
    );
    // A limit named in another matched limit's `replaces` does not apply to this request.
    const replaced = new Set(slots.flatMap((slot) => slot.rule?.limit?.replaces ?? []));
    const live = slots.filter(
      (slot) => slot.applied !== undefined && !(slot.applied.name !== '' && replaced.has(slot.applied.name)),
    );
    await this.#decide(snapshot, live, domain);
    return this.#answer(slots, live);
  }

  #resolve(
    snapshot: Snapshot,
    domain: string,
    root: Level | undefined,
    descriptor: DescriptorMessage,
    index: number,
    requestHits: number | undefined,
  ): Slot {
    const entries: readonly Entry[] = descriptor.entries ?? [];
    const hits = hitsOf(descriptor, requestHits);
    const none: Slot = {
      index,
      domain,
      applied: undefined,
      unlimited: false,
      rule: undefined,
      statsParts: [],
      identifier: '',
      hits,
      shadow: false,
    };
    // An unknown domain limits nothing, even with an override, as in the reference.
    if (root === undefined) return none;
    const match = entries.length === 0 ? undefined : matchDescriptor(root, entries);
    const override = descriptor.limit;
    const unit = override === undefined || override === null ? undefined : overrideUnit(override.unit ?? 0);
    if (override !== undefined && override !== null && unit !== undefined) {
      // Envoy's override from route metadata replaces the rule's limit and its shadow mode.
      return {
        ...none,
        applied: snapshot.limiters.forOverride(domain, match?.rule, override.requests_per_unit ?? 0, unit),
        rule: undefined,
        statsParts: descriptorParts(entries),
        identifier: identifierOf(entries),
      };
    }
    if (match === undefined) return none;
    const rule = match.rule;
    return {
      ...none,
      applied: snapshot.limiters.forRule(rule),
      unlimited: rule.limit?.unlimited === true,
      rule,
      statsParts: match.statsParts,
      identifier: match.identifier,
      shadow: rule.shadowMode,
    };
  }

  async #decide(snapshot: Snapshot, slots: readonly Slot[], domain: string): Promise<void> {
    const tag = this.#options.oneShard ? domain : undefined;
    const enforced: Slot[] = [];
    const alone: Promise<void>[] = [];
    for (const slot of slots) {
      const applied = slot.applied as AppliedLimit;
      const limiter = applied.limiter;
      if (limiter === undefined || slot.hits > applied.maxCost || !Number.isSafeInteger(slot.hits)) {
        slot.staticOver = slot.hits > 0;
        if (!slot.shadow && slot.staticOver) enforced.push(slot);
        continue;
      }
      const member = { limiter, identifier: slot.identifier, cost: slot.hits, limit: applied.callLimit };
      if (slot.hits === 0) {
        // A check without hits looks and takes nothing; it can never make the request over.
        alone.push(keep(slot, limiter.peek(slot.identifier, callOptions({ ...member, cost: 1 }, tag))));
      } else if (slot.shadow) {
        // A shadowed limit never refuses, so it decides on its own and counts as the reference does.
        alone.push(keep(slot, limiter.limit(slot.identifier, callOptions(member, tag))));
      } else enforced.push(slot);
    }
    alone.push(this.#decideEnforced(snapshot, enforced, tag));
    await Promise.all(alone);
  }

  /** The enforced descriptors, together: if one is over (even statically), nothing is taken from the others. */
  async #decideEnforced(snapshot: Snapshot, slots: readonly Slot[], tag: string | undefined): Promise<void> {
    const asking = slots.filter((slot) => slot.staticOver !== true);
    if (asking.length === 0) return;
    // Descriptors on one key (the same entries twice) are one member asking for their hits together.
    const members: DescriptorCall[] = [];
    const maxCosts: number[] = [];
    const memberAt = new Map<string, number>();
    const slotMember: number[] = [];
    for (const slot of asking) {
      const applied = slot.applied as AppliedLimit;
      const limiter = applied.limiter as NonNullable<AppliedLimit['limiter']>;
      const key = `${limiter.name}\n${slot.identifier}`;
      const at = memberAt.get(key);
      if (at === undefined) {
        memberAt.set(key, members.length);
        slotMember.push(members.length);
        members.push({ limiter, identifier: slot.identifier, cost: slot.hits, limit: applied.callLimit });
        maxCosts.push(applied.maxCost);
      } else {
        const member = members[at] as DescriptorCall;
        members[at] = { ...member, cost: member.cost + slot.hits };
        slotMember.push(at);
      }
    }
    const tooMany = members.map((member, i) => member.cost > (maxCosts[i] as number));
    let decisions: readonly Decision[];
    if (tooMany.includes(true) || asking.length < slots.length) {
      // Over before any store is asked: the others are only looked at, with their hits.
      decisions = await Promise.all(
        members.map(async (member, i) => {
          const cost = Math.min(member.cost, maxCosts[i] as number);
          const decision = await member.limiter.peek(
            member.identifier,
            callOptions({ ...member, cost }, tag),
          );
          return tooMany[i] === true ? { ...decision, allowed: false } : decision;
        }),
      );
    } else decisions = await snapshot.together.decide(members, tag);
    asking.forEach((slot, i) => {
      slot.decision = decisions[slotMember[i] as number];
    });
  }

  #answer(slots: readonly Slot[], live: readonly Slot[]): RateLimitResponseMessage {
    const { metrics, shadow: globalShadow } = this.#options;
    let failed = false;
    let answered = false;
    let binding: Slot | undefined;
    const statuses = slots.map((slot): DescriptorStatusMessage => {
      const applied = slot.applied;
      if (slot.unlimited) {
        metrics?.unlimited({
          domain: slot.domain,
          statsParts: slot.statsParts,
          ruleParts: slot.rule?.parts ?? [],
          hits: slot.hits,
        });
        return {
          code: CODE.OK,
          current_limit: null,
          limit_remaining: MAX_UINT32,
          duration_until_reset: null,
        };
      }
      if (applied === undefined || !live.includes(slot)) {
        return { code: CODE.OK, current_limit: null, limit_remaining: 0, duration_until_reset: null };
      }
      const decision = slot.decision;
      if (decision !== undefined && isStoreFailure(decision.reason)) {
        if (applied.onStoreError === 'unavailable') failed = true;
      } else if (decision !== undefined && decision.reason === undefined) answered = true;
      if (decision !== undefined && constrains(slot, binding)) binding = slot;
      metrics?.descriptor(outcomeOf(slot, applied));
      return statusOf(slot, applied);
    });
    if (answered && !failed && this.#storeDown) {
      this.#storeDown = false;
      this.#options.log('the store answers again');
    }
    if (failed) {
      metrics?.error('redis_error');
      throw new RequestRefused('UNAVAILABLE', 'the rate limit store failed or did not answer in time');
    }
    const over = live.some((slot) => isOver(slot) && !slot.shadow);
    if (over && globalShadow) metrics?.globalShadow();
    return {
      overall_code: over && !globalShadow ? CODE.OVER_LIMIT : CODE.OK,
      statuses,
      response_headers_to_add: this.#options.headers && binding !== undefined ? headersOf(binding) : [],
      request_headers_to_add: [],
    };
  }
}

/** Whether a descriptor is over its limit: hits it cannot have (a check of 0 hits never is). */
function isOver(slot: Slot): boolean {
  return slot.hits > 0 && (slot.staticOver === true || slot.decision?.allowed === false);
}

/** Whether `slot` constrains the request more than `than`: over before within, then fewer left. */
function constrains(slot: Slot, than: Slot | undefined): boolean {
  if (than?.decision === undefined) return true;
  const overNow = isOver(slot) && !slot.shadow;
  const overThen = isOver(than) && !than.shadow;
  if (overNow !== overThen) return overNow;
  return (slot.decision?.remaining ?? 0) < than.decision.remaining;
}

function statusOf(slot: Slot, applied: AppliedLimit): DescriptorStatusMessage {
  const decision = slot.decision;
  // Over without a decision (a quota of 0): until the window ends, as the reference reports it.
  const resetMs =
    decision === undefined ? applied.windowMs - (Date.now() % applied.windowMs) : decision.resetMs;
  return {
    code: isOver(slot) && !slot.shadow ? CODE.OVER_LIMIT : CODE.OK,
    current_limit: {
      name: applied.name,
      requests_per_unit: applied.requestsPerUnit,
      unit: applied.unit === undefined ? 0 : RESPONSE_UNIT[applied.unit],
    },
    limit_remaining: decision === undefined ? 0 : Math.min(decision.remaining, MAX_UINT32),
    duration_until_reset: { seconds: Math.floor(resetMs / 1000), nanos: (resetMs % 1000) * 1_000_000 },
  };
}

/** What the metrics count for a descriptor: units in use before it, from what remains after it. */
function outcomeOf(slot: Slot, applied: AppliedLimit): DescriptorOutcome {
  const over = isOver(slot);
  const limit = applied.requestsPerUnit;
  const remaining = slot.decision?.remaining ?? 0;
  // A granted request took its hits; a refused one took nothing.
  const before = limit - remaining - (over || slot.decision === undefined ? 0 : slot.hits);
  return {
    domain: slot.domain,
    statsParts: slot.statsParts,
    ruleParts: slot.rule?.parts ?? slot.statsParts,
    hits: slot.hits,
    limit,
    before: Math.max(0, before),
    over,
    shadow: slot.shadow,
  };
}

/** The IETF RateLimit / RateLimit-Policy fields of the most constraining descriptor. */
function headersOf(slot: Slot): HeaderValueMessage[] {
  const applied = slot.applied as AppliedLimit;
  const name = applied.name !== '' ? applied.name : [slot.domain, ...slot.statsParts].join('.');
  const headers = rateLimitHeaders(
    [{ name, windowMs: applied.windowMs, decision: slot.decision as Decision }],
    { style: 'ietf' },
  );
  return Object.entries(headers).map(([key, value]) => ({ key, value }));
}
