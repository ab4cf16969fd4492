// How a request's end settles what its limiters took: leases released, count modes' refunds, long responses' leases renewed.
import type { Grant } from '../core/index.js';
import type { Decision } from '../types.js';
import type { PolicyDecision } from './header-values.js';
import type { RateLimitInfo } from './info.js';
import type { ResolvedOptions } from './options.js';

/** Called once the response is finished, or the client went away (`finished` false). */
export type Settle = (status: number, finished: boolean) => void;

/** What one middleware took on a request and the decisions it added, to be given back once. */
export interface Taken {
  readonly grant: Grant;
  /** Where its decisions start in the request's entries. */
  readonly first: number;
  readonly decisions: readonly Decision[];
}

/** Per request: the decisions of every middleware (so each adds its items), what each took, the decision for the handler. */
export interface RequestState {
  readonly entries: PolicyDecision[];
  readonly taken: Taken[];
  info: RateLimitInfo | undefined;
}

/**
 * Gives back what middlewares took on a request (everything, or only their leases), and has the
 * request's entries say what is left once it is given back, as the next request will see it.
 */
export async function giveBack(
  state: RequestState,
  taken: readonly Taken[],
  leasesOnly = false,
): Promise<void> {
  await Promise.all(taken.map((part) => (leasesOnly ? part.grant.release() : part.grant.refund())));
  for (const part of taken) {
    part.decisions.forEach((decision, i) => {
      const entry = state.entries[part.first + i] as PolicyDecision;
      state.entries[part.first + i] = { ...entry, decision };
    });
  }
}

/**
 * How the end of an allowed request settles what one middleware took: its leases released (a
 * response that finished or a client that went away), and in a count mode its units given back
 * when the response says so. While the response runs, its leases are renewed when
 * `extendLeases` asks. Undefined when there is nothing to settle.
 */
export function settler<Req>(
  config: ResolvedOptions<Req>,
  state: RequestState,
  taken: Taken,
): Settle | undefined {
  const { grant } = taken;
  const leases = grant.holdsLeases;
  const counts = config.count !== 'all' && !grant.empty;
  if (!leases && !counts) return undefined;
  const renewal = leases ? renewing(config, grant) : undefined;
  let done = false;
  return (status, finished) => {
    if (done) return;
    done = true;
    if (renewal !== undefined) clearInterval(renewal);
    const failed = !finished || config.isFailure(status);
    const refund = counts && failed !== (config.count === 'failed');
    if (refund || leases) giveBack(state, [taken], !refund).catch(config.onRefundError);
  };
}

/**
 * A timer that renews the grant's leases while the response runs (see `extendLeases`): one per
 * request, `unref`'d, stopped once no lease is held (released, or lapsed before a renewal).
 */
function renewing<Req>(
  config: ResolvedOptions<Req>,
  grant: Grant,
): ReturnType<typeof setInterval> | undefined {
  const option = config.extendLeases;
  if (option === undefined) return undefined;
  const everyMs = option === 'half' ? Math.max(1, Math.floor(grant.shortestLeaseMs / 2)) : option;
  const timer = setInterval(() => {
    grant.extend().then(
      (held) => {
        if (!held) clearInterval(timer);
      },
      (error: unknown) => {
        clearInterval(timer);
        config.onRefundError(error);
      },
    );
  }, everyMs);
  // A renewal never keeps the process alive (some runtimes' timers have no unref).
  (timer as { unref?: () => void }).unref?.();
  return timer;
}

/**
 * Settles when a web-standard request's client goes away (its signal aborts, as @hono/node-server,
 * Deno and Bun abort it), so that an aborted request does not hold its slots until they lapse.
 */
export function settleOnAbort(signal: AbortSignal | undefined, settle: Settle | undefined): void {
  if (settle === undefined || signal === undefined) return;
  if (signal.aborted) {
    settle(499, false);
    return;
  }
  signal.addEventListener('abort', () => settle(499, false), { once: true });
}
