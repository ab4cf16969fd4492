// The one request path every adapter calls: skip, choose limiters, key, cost, decide, headers, refusal, refunds.
import { decideGroup } from '../combine.js';
import type { Grant } from '../core/group.js';
import type { Decision } from '../types.js';
import { isKeyExtractor } from './client-key.js';
import { type PolicyDecision, rateLimitHeaders } from './headers.js';
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
      /** The key the request was charged under (several joined by spaces); `undefined` for a request refused for lack of one. */
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

/** What one middleware took on a request and the decisions it added, to be given back once. */
interface Taken {
  readonly grant: Grant;
  /** Where its decisions start in the request's entries. */
  readonly first: number;
  readonly decisions: readonly Decision[];
}

/** Per request: the decisions of every middleware (so each adds its items) and what each took. */
interface RequestState {
  readonly entries: PolicyDecision[];
  readonly taken: Taken[];
}

const requests = new WeakMap<object, RequestState>();

function stateOf(request: object): RequestState {
  let state = requests.get(request);
  if (state === undefined) {
    state = { entries: [], taken: [] };
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

/** One usable identifier for every limiter, one per limiter, or undefined when any is missing. */
function usableKeys(value: unknown, count: number): string | readonly string[] | undefined {
  if (!Array.isArray(value)) return usableKey(value);
  if (value.length !== count) return undefined;
  const keys = value.map(usableKey);
  return keys.includes(undefined) ? undefined : (keys as string[]);
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

/**
 * Gives back what middlewares took on a request, and has the request's headers say what is left
 * once it is given back, as the next request will see it.
 */
async function giveBack(state: RequestState, taken: readonly Taken[]): Promise<void> {
  await Promise.all(taken.map((part) => part.grant.refund()));
  for (const part of taken) {
    part.decisions.forEach((decision, i) => {
      const entry = state.entries[part.first + i] as PolicyDecision;
      state.entries[part.first + i] = { ...entry, decision };
    });
  }
}

/**
 * Runs the limiters for one request. `state` is an object that lives as long as the request (the
 * Node request, the fetch Request), where decisions of several middlewares are gathered. Rejects
 * only with errors of the caller's own functions or of bad calls (an identifier the limiters
 * refuse): the adapter hands them to the framework's error path. A request refused here, or by a
 * later middleware, takes nothing from any limiter.
 */
export async function evaluate<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  view: RequestView,
  state: object,
): Promise<Evaluation> {
  if (config.skip !== undefined && (await config.skip(request))) return { kind: 'skip' };
  const group = config.selectGroup(request, view);
  if (group === undefined) return { kind: 'skip' };
  const cost = typeof config.cost === 'number' ? config.cost : await config.cost(request);
  if (cost === 0) return { kind: 'skip' };

  const members = group.members;
  const extracted = isKeyExtractor(config.key) ? config.key.extract(view) : await config.key(request);
  let keys = usableKeys(extracted, members.length);
  if (keys === undefined) {
    if (config.missingKey === 'deny') {
      const description = isKeyExtractor(config.key) ? config.key.description : 'key function';
      return { kind: 'deny', refusal: missingKeyRefusal(description), key: undefined, entries: [] };
    }
    keys = UNKNOWN_KEY;
  }
  const tag = typeof config.tag === 'function' ? await config.tag(request) : config.tag;
  const outcome = await decideGroup(group, 'limit', keys, tag === undefined ? { cost } : { cost, tag });
  const key = typeof keys === 'string' ? keys : keys.join(' ');

  const requestState = stateOf(state);
  const taken: Taken = {
    grant: outcome.grant,
    first: requestState.entries.length,
    decisions: outcome.decisions,
  };
  requestState.entries.push(
    ...members.map((member, index) => ({
      name: member.name,
      windowMs: member.policy.windowMs,
      decision: outcome.decisions[index] as Decision,
    })),
  );
  const entries = requestState.entries;

  if (!outcome.allowed) {
    // A refused request takes nothing: neither here (the group gave back its own) nor in the
    // middlewares that ran before on it.
    await giveBack(requestState, requestState.taken.splice(0));
    const refusal = refusalFor(entries, { ...config.problem, style: config.styles }) as Refusal;
    return { kind: 'deny', refusal, key, entries };
  }
  requestState.taken.push(taken);

  let settle: ((status: number, finished: boolean) => void) | undefined;
  if (config.count !== 'all' && !outcome.grant.empty) {
    let done = false;
    settle = (status, finished) => {
      if (done) return;
      done = true;
      const failed = !finished || config.isFailure(status);
      if (failed !== (config.count === 'failed')) {
        giveBack(requestState, [taken]).catch(config.onRefundError);
      }
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
