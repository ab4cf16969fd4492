// ShouldRateLimit, transport aside: resolve each descriptor, decide them together, answer as the reference does.
import type { BudgetOptions, MetricsRecorder, Store } from 'sluice';
import { refuses, statusesOf } from './answer.js';
import { checkBounds, type EnvoyBounds } from './bounds.js';
import type { EnvoyConfig } from './config.js';
import { Together } from './decide.js';
import { RuleLimiters } from './limiters.js';
import {
  CODE,
  type RateLimitRequestMessage,
  type RateLimitResponseMessage,
  RequestRefused,
} from './messages.js';
import { dynamicMetadata, type MetadataObject } from './metadata.js';
import type { EnvoyMetrics } from './metrics.js';
import { type DescriptorResult, decideRequest, type RequestDecision } from './request-decision.js';
import { type HeaderItem, headerAnswer } from './response-headers.js';
import { liveDescriptors, type ResolvedDescriptor, resolveDescriptor } from './slots.js';
import { mapInTurns, nextTurn } from './turns.js';

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

  /** Answers one request, or throws RequestRefused (answered as a gRPC status). */
  async shouldRateLimit(request: RateLimitRequestMessage): Promise<RateLimitResponseMessage> {
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
    const mapped = mapInTurns(
      descriptors,
      (descriptor) => Math.max(1, descriptor.entries?.length ?? 0),
      (descriptor, index) => resolveDescriptor(resolver, descriptor, index, request.hits_addend),
    );
    const { results: slots, large } = mapped instanceof Promise ? await mapped : mapped;
    if (large) await nextTurn();
    const live = liveDescriptors(slots);
    const decided = await decideRequest(live, {
      together: snapshot.together,
      tag: this.#options.oneShard ? domain : undefined,
      // Under `--quota-mode`, a descriptor with no limit is a quota-mode descriptor that passes.
      quotaWithoutLimit: this.#options.quotaMode ? quotaWithoutLimit(slots, live) : 0,
    });
    if (large) await nextTurn();
    return this.#answer(request, slots, live, decided);
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
      response_headers_to_add: headers?.headers ?? [],
      request_headers_to_add: [],
      raw_body: headers?.body,
      dynamic_metadata: this.#options.metadata ? metadataOf(request, live, decided.outcomes) : undefined,
    };
  }
}

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
