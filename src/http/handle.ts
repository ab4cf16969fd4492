// The one request path every adapter calls: skip, choose limiters, key, cost, decide, headers, refusal, refunds.
import type { Limiter } from '../limiter.js';
import type { Decision } from '../types.js';
import { isKeyExtractor } from './client-key.js';
import { isEnforcedDenial, type PolicyDecision, rateLimitHeaders } from './headers.js';
import type { ResolvedOptions } from './options.js';
import { PROBLEM_CONTENT_TYPE, type ProblemDetails, type Refusal, refusalFor } from './problem.js';
import type { RequestView } from './view.js';

/** The identifier shared by every request that carries no usable key (with `missingKey: 'shared'`). */
export const UNKNOWN_KEY = '(unknown)';

const MAX_KEY_BYTES = 1024;

/** What the adapter should do with a request. */
export type Evaluation =
  | { readonly kind: 'skip' }
  | {
      readonly kind: 'allow';
      /** Rate-limit headers of every limiter that ran on this request so far. */
      readonly headers: Record<string, string>;
      /** Call once the response is finished (count modes); `undefined` when nothing is to settle. */
      readonly settle: ((status: number, finished: boolean) => void) | undefined;
      readonly key: string;
      readonly entries: readonly PolicyDecision[];
    }
  | {
      readonly kind: 'deny';
      readonly refusal: Refusal;
      /** The key the request was charged under; `undefined` for a request refused for lack of one. */
      readonly key: string | undefined;
      readonly entries: readonly PolicyDecision[];
    };

/** What a custom denial handler learns about the refusal it is to answer. */
export interface DenialInfo {
  /** 429 for quota, 503 when a limiter failed closed, 400 for a request without a key (`missingKey: 'deny'`). */
  readonly status: number;
  /** Headers already computed: rate-limit fields, `Retry-After`, `Content-Type`. */
  readonly headers: Record<string, string>;
  readonly problem: ProblemDetails;
  readonly key: string | undefined;
  readonly entries: readonly PolicyDecision[];
}

/** What one middleware took on a request, to be given back once (a later refusal, or the count mode). */
interface Grant {
  refund(): Promise<void>;
}

/** Per request: the decisions of every middleware (so each adds its items) and what each took. */
interface RequestState {
  readonly entries: PolicyDecision[];
  readonly grants: Grant[];
}

const requests = new WeakMap<object, RequestState>();

function stateOf(request: object): RequestState {
  let state = requests.get(request);
  if (state === undefined) {
    state = { entries: [], grants: [] };
    requests.set(request, state);
  }
  return state;
}

/** The decisions taken on a request so far (for adapters that write headers late). */
export function decisionsOn(request: object): readonly PolicyDecision[] {
  return requests.get(request)?.entries ?? [];
}

function usableKey(value: unknown): string | undefined {
  if (typeof value !== 'string' || value === '') return undefined;
  if (value.length * 3 > MAX_KEY_BYTES && Buffer.byteLength(value) > MAX_KEY_BYTES) return undefined;
  return value;
}

function missingKeyRefusal(description: string): Refusal {
  const problem: ProblemDetails = {
    type: 'about:blank',
    title: 'Bad Request',
    status: 400,
    detail: `The request carries no usable client key (${description}).`,
    'violated-policies': [],
  };
  return {
    status: 400,
    headers: { 'Content-Type': PROBLEM_CONTENT_TYPE },
    problem,
    body: JSON.stringify(problem),
  };
}

/** Whether the decision took units that a refund should give back. */
function consumed(decision: Decision): boolean {
  return (
    decision.allowed &&
    decision.wouldAllow !== false &&
    decision.reason !== 'store-error' &&
    decision.reason !== 'timeout'
  );
}

function refundAll(
  limiters: readonly Limiter[],
  decisions: readonly (Decision | undefined)[],
  key: string,
  cost: number,
  onError: (error: unknown) => void,
): Promise<void> {
  const refunds = limiters.map((limiter, index) => {
    const decision = decisions[index];
    if (decision === undefined || !consumed(decision)) return undefined;
    return limiter.refund(key, cost).then(
      () => undefined,
      (error: unknown) => onError(error),
    );
  });
  return Promise.all(refunds).then(() => undefined);
}

/**
 * Runs the limiters for one request. `state` is an object that lives as long as the request (the
 * Node request, the fetch Request), where decisions of several middlewares are gathered. Rejects
 * only with errors of the caller's own functions or of the limiters (a store failure the limiter
 * does not absorb): the adapter hands them to the framework's error path.
 */
export async function evaluate<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  view: RequestView,
  state: object,
): Promise<Evaluation> {
  if (config.skip !== undefined && (await config.skip(request))) return { kind: 'skip' };
  const limiters = config.selectLimiters(request, view);
  if (limiters.length === 0) return { kind: 'skip' };
  const cost = typeof config.cost === 'number' ? config.cost : await config.cost(request);
  if (cost === 0) return { kind: 'skip' };

  const extracted = isKeyExtractor(config.key) ? config.key.extract(view) : await config.key(request);
  let key = usableKey(extracted);
  if (key === undefined) {
    if (config.missingKey === 'deny') {
      const description = isKeyExtractor(config.key) ? config.key.description : 'key function';
      return { kind: 'deny', refusal: missingKeyRefusal(description), key: undefined, entries: [] };
    }
    key = UNKNOWN_KEY;
  }

  const settled = await Promise.allSettled(limiters.map((limiter) => limiter.limit(key, { cost })));
  const decisions = settled.map((result) => (result.status === 'fulfilled' ? result.value : undefined));
  const failure = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failure !== undefined) {
    // What the other limiters granted is given back: a request that fails takes nothing.
    await refundAll(limiters, decisions, key, cost, config.onRefundError);
    throw failure.reason;
  }
  const requestState = stateOf(state);
  const first = requestState.entries.length;
  requestState.entries.push(
    ...limiters.map((limiter, index) => ({
      name: limiter.name,
      windowMs: limiter.policy.windowMs,
      decision: decisions[index] as Decision,
    })),
  );
  let refunded: Promise<void> | undefined;
  const grant: Grant = {
    refund() {
      refunded ??= (() => {
        // The headers then report what is left after the refund, as the next request will see it.
        decisions.forEach((decision, index) => {
          if (decision === undefined || !consumed(decision)) return;
          const remaining = Math.min(decision.limit, decision.remaining + cost);
          const entry = requestState.entries[first + index] as PolicyDecision;
          requestState.entries[first + index] = { ...entry, decision: { ...decision, remaining } };
        });
        return refundAll(limiters, decisions, key, cost, config.onRefundError);
      })();
      return refunded;
    },
  };
  const entries = requestState.entries;

  if (decisions.some((decision) => isEnforcedDenial(decision as Decision))) {
    // A refused request takes nothing: neither here nor in the middlewares that ran before on it.
    await Promise.all([grant, ...requestState.grants].map((taken) => taken.refund()));
    const refusal = refusalFor(entries, { ...config.problem, style: config.styles }) as Refusal;
    return { kind: 'deny', refusal, key, entries };
  }
  requestState.grants.push(grant);

  let settle: ((status: number, finished: boolean) => void) | undefined;
  if (config.count !== 'all') {
    let done = false;
    settle = (status, finished) => {
      if (done) return;
      done = true;
      const failed = !finished || config.isFailure(status);
      if (failed !== (config.count === 'failed')) void grant.refund();
    };
  }
  return {
    kind: 'allow',
    headers: rateLimitHeaders(entries, { style: config.styles }),
    settle,
    key,
    entries,
  };
}

/** The information handed to a custom denial handler. */
export function denialInfo(evaluation: Extract<Evaluation, { kind: 'deny' }>): DenialInfo {
  const { refusal } = evaluation;
  return {
    status: refusal.status,
    headers: refusal.headers,
    problem: refusal.problem,
    key: evaluation.key,
    entries: evaluation.entries,
  };
}
