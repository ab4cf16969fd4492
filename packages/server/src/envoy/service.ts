// ShouldRateLimit, transport aside: resolve each descriptor, decide them together, answer as the reference does.
import type { BudgetOptions, MetricsRecorder, Store } from 'sluice';
import { refuses, statusesOf } from './answer.js';
import { checkBounds, type EnvoyBounds } from './bounds.js';
import type { EnvoyConfig } from './config.js';
import { Together } from './decide.js';
import { RuleLimiters } from './limiters.js';
import {
  CODE,
  type DescriptorMessage,
  type HeaderValueMessage,
  type RateLimitRequestMessage,
  type RateLimitResponseMessage,
  RequestRefused,
} from './messages.js';
import { dynamicMetadata, type MetadataObject } from './metadata.js';
import type { EnvoyMetrics } from './metrics.js';
import {
  type DecideContext,
  type DescriptorResult,
  decideRequest,
  type RequestDecision,
} from './request-decision.js';
import { type HeaderItem, headerAnswer } from './response-headers.js';
import { liveDescriptors, type ResolvedDescriptor, resolveDescriptor } from './slots.js';
import { type InTurns, mapInTurns, nextTurn } from './turns.js';

/** Options of {@link EnvoyService}. */
export interface EnvoyServiceOptions {
  readonly store: Store;
  /** A budget the rules share with other regions (see RuleLimiters); undefined: the store's alone. */
  readonly budget?: BudgetOptions | undefined;
  /** Where the rules that share the budget report (see RuleLimiters); undefined: nowhere. */
  readonly recorder?: MetricsRecorder | undefined;
  /**
   * Whether the store is one shard (memory, one Redis, Sentinel): then every key of a domain shares
   * one hash tag and a request's descriptors are decided by one atomic script. On a Redis Cluster,
   * false: keys spread by identifier, descriptors decided side by side with refunds.
   */
  readonly oneShard: boolean;
  /** Answer OK whatever the limits say (they are still counted): `--shadow`. */
  readonly shadow: boolean;
  /** Every descriptor in quota mode: `--quota-mode`. */
  readonly quotaMode: boolean;
  /** Put the IETF `RateLimit` / `RateLimit-Policy` fields in `response_headers_to_add`: `--envoy-headers`. */
  readonly headers: boolean;
  /** Return the request and the passing descriptors' `metadata` as dynamic metadata: `--envoy-metadata`. */
  readonly metadata: boolean;
  /** The most descriptors, and entries per descriptor, one call may ask. */
  readonly bounds: EnvoyBounds;
  readonly metrics: EnvoyMetrics | undefined;
  /** One line for the log: the store failed, or answers again. */
  readonly log: (line: string) => void;
}

/** The config in force and what was built from it; replaced whole on reload, so calls in flight keep theirs. */
interface Snapshot {
  readonly config: EnvoyConfig;
  readonly limiters: RuleLimiters;
  readonly together: Together;
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

  /**
   * Puts a config in force; its limiters are made here, once. The previous config's stop their
   * background work (a budget's ledger calls); calls in flight still decide with them.
   */
  load(config: EnvoyConfig): void {
    this.#snapshot?.limiters.close();
    const limiters = new RuleLimiters(config.rules, {
      store: this.#options.store,
      budget: this.#options.budget,
      recorder: this.#options.recorder,
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

  /** Stops the limiters' background work (a budget's ledger calls). */
  close(): void {
    this.#snapshot?.limiters.close();
  }

  /**
   * Answers one request, or rejects with RequestRefused (answered as a gRPC status). Not an async
   * function: the usual request is resolved at once and answered from its decision's promise, with
   * no frame of its own kept while the store decides.
   */
  shouldRateLimit(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage> {
    try {
      return this.#decide(request);
    } catch (error) {
      return Promise.reject(error);
    }
  }

  #decide(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage> {
    const domain = request.domain ?? '';
    if (domain === '') throw new RequestRefused('INVALID_ARGUMENT', 'rate limit domain must not be empty');
    const descriptors = request.descriptors ?? [];
    if (descriptors.length === 0) {
      throw new RequestRefused('INVALID_ARGUMENT', 'rate limit descriptor list must not be empty');
    }
    checkBounds(request, this.#options.bounds);
    const snapshot = this.#snapshot;
    if (snapshot === undefined) throw new RequestRefused('UNAVAILABLE', 'no rate limit configuration loaded');
    const resolver = {
      domain,
      root: snapshot.config.domains.get(domain),
      limiters: snapshot.limiters,
      globalQuota: this.#options.quotaMode,
    };
    // A large request is resolved over several turns, and decided and answered in turns of its own.
    const mapped = mapInTurns(descriptors, entriesOf, (descriptor, index) =>
      resolveDescriptor(resolver, descriptor, index, request.hits_addend),
    );
    if (mapped instanceof Promise) return this.#decideLarge(request, snapshot, mapped);
    const slots = mapped.results;
    const live = liveDescriptors(slots);
    return decideRequest(live, this.#context(snapshot, domain, slots, live)).then((decided) =>
      this.#answer(request, slots, live, decided),
    );
  }

  /** A request resolved over several turns: decided, then answered, each in a turn of its own. */
  async #decideLarge(
    request: RateLimitRequestMessage,
    snapshot: Snapshot,
    mapped: Promise<InTurns<ResolvedDescriptor>>,
  ): Promise<RateLimitResponseMessage> {
    const { results: slots, large } = await mapped;
    if (large) await nextTurn();
    const live = liveDescriptors(slots);
    const decided = await decideRequest(live, this.#context(snapshot, request.domain ?? '', slots, live));
    if (large) await nextTurn();
    return this.#answer(request, slots, live, decided);
  }

  #context(
    snapshot: Snapshot,
    domain: string,
    slots: readonly ResolvedDescriptor[],
    live: readonly ResolvedDescriptor[],
  ): DecideContext {
    return {
      together: snapshot.together,
      tag: this.#options.oneShard ? domain : undefined,
      // Under `--quota-mode`, a descriptor with no limit is a quota-mode descriptor that passes.
      quotaWithoutLimit: this.#options.quotaMode ? quotaWithoutLimit(slots, live) : 0,
    };
  }

  #answer(
    request: RateLimitRequestMessage,
    slots: readonly ResolvedDescriptor[],
    live: readonly ResolvedDescriptor[],
    decided: RequestDecision,
  ): RateLimitResponseMessage {
    const { metrics, shadow: globalShadow } = this.#options;
    const { statuses, failed, answered } = statusesOf(slots, live, decided.outcomes, metrics);
    if (answered && !failed && this.#storeDown) {
      this.#storeDown = false;
      this.#options.log('the store answers again');
    }
    if (failed) {
      metrics?.error('redis_error');
      throw new RequestRefused('UNAVAILABLE', 'the rate limit store failed or did not answer in time');
    }
    if (decided.over && globalShadow) metrics?.globalShadow();
    const over = decided.over && !globalShadow;
    const headers = this.#options.headers
      ? headerAnswer(headerItems(live, decided.outcomes), over)
      : undefined;
    return {
      overall_code: over ? CODE.OVER_LIMIT : CODE.OK,
      statuses,
      response_headers_to_add: headers?.headers ?? NO_HEADERS,
      request_headers_to_add: NO_HEADERS,
      raw_body: headers?.body,
      dynamic_metadata: this.#options.metadata ? metadataOf(request, live, decided.outcomes) : undefined,
    };
  }
}

/** No headers to add: one list for every response (a response is never changed once made). */
const NO_HEADERS: readonly HeaderValueMessage[] = Object.freeze([]);

/** A descriptor's weight in a turn's work: its entries, at least one. */
const entriesOf = (descriptor: DescriptorMessage): number => Math.max(1, descriptor.entries?.length ?? 0);

/** The descriptors with no live limit that are not unlimited (the reference leaves unlimited ones out). */
function quotaWithoutLimit(
  slots: readonly ResolvedDescriptor[],
  live: readonly ResolvedDescriptor[],
): number {
  const liveSet = new Set(live);
  return slots.filter((slot) => !slot.unlimited && !liveSet.has(slot)).length;
}

/** An item per live descriptor, named after its rule (`rate_limit.name`, else the rule's stats key). */
function headerItems(
  live: readonly ResolvedDescriptor[],
  outcomes: readonly DescriptorResult[],
): HeaderItem[] {
  return live.map((slot, i) => {
    const applied = slot.applied as NonNullable<ResolvedDescriptor['applied']>;
    const outcome = outcomes[i] as DescriptorResult;
    return {
      name: applied.name !== '' ? applied.name : [slot.domain, ...slot.statsParts].join('.'),
      windowMs: applied.windowMs,
      decision: outcome.decision,
      refusing: refuses(slot, outcome),
      quota: slot.quota,
    };
  });
}

/** The dynamic metadata: the request, and the merged `metadata` of the live descriptors that passed. */
function metadataOf(
  request: RateLimitRequestMessage,
  live: readonly ResolvedDescriptor[],
  outcomes: readonly DescriptorResult[],
): MetadataObject {
  const passed: MetadataObject[] = [];
  live.forEach((slot, i) => {
    const metadata = slot.rule?.metadata;
    if (metadata !== undefined && !refuses(slot, outcomes[i] as DescriptorResult)) passed.push(metadata);
  });
  return dynamicMetadata(request.domain ?? '', request.descriptors ?? [], request.hits_addend ?? 0, passed);
}
