// The one request path every adapter calls: skip, choose limiters, key, penalties, decide, headers, refusal, refunds.

import { withFields } from '../copy.js';
import type { Group, GroupOutcome } from '../core/index.js';
import { type Decision, isStoreFailure } from '../types.js';
import { headersIn, isEnforcedDenial, type PolicyDecision } from './headers.js';
import { type RateLimitInfo, rateLimitInfo } from './info.js';
import type { ResolvedOptions } from './options.js';
import type { Penalties, PenaltyHold } from './penalties.js';
import {
  listRefusal,
  PROBLEM_CONTENT_TYPE,
  type ProblemDetails,
  type ProblemRefusal,
  penaltyRefusal,
  refusalFor,
} from './problem.js';
import { requestKey } from './request-key.js';
import type { Finished } from './settle.js';
import { giveBackTaken, type RequestState, settler, type Taken } from './settle.js';
import type { RequestView } from './view.js';

export { UNKNOWN_KEY } from './request-key.js';

/** What the adapter should do with a request. */
export type Evaluation =
  | { readonly kind: 'skip' }
  | {
      readonly kind: 'allow';
      /** Rate-limit headers of every limiter that ran on this request so far. */
      readonly headers: Record<string, string>;
      /**
       * Call once the response finished, or closed before it did, or the client went away
       * (`completed` false): releases the leases of concurrency limiters, settles count modes and
       * `settle`; `undefined` when nothing is to be done then.
       */
      readonly finished: Finished | undefined;
      /** Whether `finished` wants the bytes of the response's body (a `settle` option may read them). */
      readonly countsBytes: boolean;
      readonly key: string;
      readonly entries: readonly PolicyDecision[];
      /** The decision for the handler. */
      readonly info: RateLimitInfo;
    }
  | {
      readonly kind: 'deny';
      readonly refusal: ProblemRefusal;
      /** The key the request was charged under (several joined by spaces); `undefined` for a request refused for lack of one. */
      readonly key: string | undefined;
      readonly entries: readonly PolicyDecision[];
    };

/** An evaluation that lets the request go on. */
export type Allowed = Extract<Evaluation, { kind: 'allow' }>;

/** What a custom denial handler learns about the refusal it is to answer. */
export interface DenialInfo {
  /**
   * 429 for quota (or a block), 403 for a ban, 503 when a limiter failed closed, 400 for a
   * request without a key (`missingKey: 'deny'`).
   */
  readonly status: number;
  /** Headers already computed: rate-limit fields, `Retry-After`, `Content-Type`. */
  readonly headers: Record<string, string>;
  readonly problem: ProblemDetails;
  readonly key: string | undefined;
  readonly entries: readonly PolicyDecision[];
}

const requests = new WeakMap<object, RequestState>();

function stateOf(request: object): RequestState {
  let state = requests.get(request);
  if (state === undefined) {
    state = { entries: [], taken: [], info: undefined };
    requests.set(request, state);
  }
  return state;
}

/** The decisions taken on a request so far (for adapters that write headers late). */
export function decisionsOn(request: object): readonly PolicyDecision[] {
  return requests.get(request)?.entries ?? [];
}

/** The decision for the handler, from every middleware that allowed the request so far. */
export function infoOn(request: object): RateLimitInfo | undefined {
  return requests.get(request)?.info;
}

function missingKeyRefusal(description: string): ProblemRefusal {
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

/** A refused request takes nothing, here or in the middlewares that ran before on it. */
async function refuse<Req>(
  config: ResolvedOptions<Req>,
  state: RequestState,
  key: string,
  held: PenaltyHold | undefined,
): Promise<Evaluation> {
  await giveBackTaken(state, state.taken.splice(0));
  const options = { ...config.problem, style: config.styles };
  const refusal =
    held === undefined
      ? (refusalFor(state.entries, options) as ProblemRefusal)
      : penaltyRefusal(state.entries, held.status, options);
  return { kind: 'deny', refusal, key, entries: state.entries };
}

/** What decides a request, once it is known to be limited: its group and its cost. */
async function chosen<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  view: RequestView,
): Promise<{ readonly group: Group; readonly cost: number } | undefined> {
  if (config.skip !== undefined && (await config.skip(request))) return undefined;
  const group = config.selectGroup(request, view);
  if (group === undefined) return undefined;
  const cost = typeof config.cost === 'number' ? config.cost : await config.cost(request);
  return cost === 0 ? undefined : { group, cost };
}

/** Adds the group's decisions to the request's entries; what the group took, to be given back. */
function entered(
  state: RequestState,
  group: Group,
  outcome: GroupOutcome,
  partitionKey: Uint8Array | undefined,
): Taken {
  const taken: Taken = { grant: outcome.grant, first: state.entries.length, decisions: outcome.decisions };
  group.pipelines.forEach((pipeline, i) => {
    // The period of the policy each decision was made under: the limiter's, or its variant for the request's limit.
    const policy = outcome.policies[i] ?? pipeline.policy;
    const entry: PolicyDecision = {
      name: pipeline.name,
      windowMs: policy.windowMs,
      decision: outcome.decisions[i] as Decision,
      partitionKey,
      unit: policy.unit,
    };
    state.entries.push(policy.leaseMs === undefined ? entry : withFields(entry, { concurrent: true }));
  });
  return taken;
}

/**
 * The penalty a refused client earns: only for going over a quota, never for a limiter failing
 * closed or for a denial, which refuses it already.
 */
async function penalty(
  outcome: GroupOutcome,
  penalties: Penalties | undefined,
  key: string,
): Promise<PenaltyHold | undefined> {
  const overQuota = outcome.decisions.some(
    (decision) =>
      isEnforcedDenial(decision) && !isStoreFailure(decision.reason) && decision.reason !== 'denied',
  );
  return overQuota ? await penalties?.refused(key) : undefined;
}

/** The request may go on: its headers, the decision for its handler, and what is done once it finished. */
function allowed<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  state: RequestState,
  key: string,
  taken: Taken,
): Evaluation {
  state.taken.push(taken);
  const finished = settler(config, request, state, taken);
  const countsBytes = finished !== undefined && config.settle !== undefined;
  const { entries } = state;
  const info = rateLimitInfo(entries, key) as RateLimitInfo;
  state.info = info;
  return {
    kind: 'allow',
    headers: headersIn(entries, config.styles),
    finished,
    countsBytes,
    key,
    entries,
    info,
  };
}

/**
 * Runs the limiters for one request. `state` is an object that lives as long as the request (the
 * Node request, the fetch Request), where decisions of several middlewares are gathered. Rejects
 * only with errors of the caller's own functions or of bad calls (an identifier or limit the
 * limiters refuse, a runtime without the client's address): the adapter hands them to the
 * framework's error path. A request refused here, or by a later middleware, takes nothing from
 * any limiter.
 */
export async function evaluate<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  view: RequestView,
  state: object,
): Promise<Evaluation> {
  const limited = await chosen(config, request, view);
  if (limited === undefined) return { kind: 'skip' };
  const { group, cost } = limited;
  const keyed = await requestKey(config, request, view, group.pipelines.length);
  if ('missing' in keyed) {
    return { kind: 'deny', refusal: missingKeyRefusal(keyed.missing), key: undefined, entries: [] };
  }
  const { key, tag } = keyed;
  const listed = config.lists?.match(keyed.identifiers);
  if (listed === 'allow') return { kind: 'skip' };
  if (listed === 'deny') {
    for (const pipeline of group.pipelines) pipeline.listDenied();
    return { kind: 'deny', refusal: listRefusal(), key, entries: [] };
  }
  const limit = typeof config.limit === 'function' ? await config.limit(request) : config.limit;
  const requestState = stateOf(state);
  const partitionKey = config.partitionKey?.(key);
  const penalties = config.penalties?.(group);
  const imposed = await penalties?.check(key);
  if (imposed !== undefined) {
    requestState.entries.push(withFields(imposed.entry, { partitionKey }));
    return refuse(config, requestState, key, imposed);
  }
  const outcome = await group.run('limit', keyed.identifiers, { cost, tag, limit });
  const taken = entered(requestState, group, outcome, partitionKey);
  if (outcome.allowed) return allowed(config, request, requestState, key, taken);
  const held = await penalty(outcome, penalties, key);
  if (held !== undefined) requestState.entries.push(withFields(held.entry, { partitionKey }));
  return refuse(config, requestState, key, held);
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
