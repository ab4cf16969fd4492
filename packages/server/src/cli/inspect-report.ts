// The text of `sluice inspect`: the stored state in words, its TTL, and the next request's decision.
import type { Decision, Policy } from 'sluice';
import { type StateView, when } from './decode.js';
import { type RegionBucketView, type RegionWindowView, regionStateText } from './inspect-region.js';
import { formatDuration, formatNumber } from './output.js';

/** What `sluice inspect` found; `--json` prints it as it is. */
export interface InspectReport {
  readonly limiter: string;
  readonly policy: string;
  readonly key: string;
  readonly type: string;
  readonly raw: unknown;
  /** Decoded by the policy, or a region's state of a budget, by windows or a bucket (`--global-redis`). */
  readonly state: StateView | RegionWindowView | RegionBucketView | null;
  readonly ttlMs: number | null;
  readonly serverTimeMs: number;
  /** peek()'s decision (`remaining`: what is left now) and what would remain after the request. */
  readonly next: Decision & { readonly cost: number; readonly remainingAfter: number };
}

function describe(
  state: StateView | RegionWindowView | RegionBucketView,
  policy: Policy,
  nowMs: number,
): string {
  if ('regionWindow' in state || 'leasedUntilMs' in state) return regionStateText(state, nowMs);
  if ('error' in state) return `unreadable: ${state.error}`;
  if ('windowIndex' in state && 'count' in state) {
    const window = `window ${state.windowIndex} (${when(state.windowStartMs)} to ${when(state.windowEndMs)})`;
    return state.current
      ? `${state.count} of ${policy.limit} used in ${window}`
      : `${state.count} used in ${window}, which has ended: stale, the current window starts empty`;
  }
  if ('estimate' in state) {
    return `window ${state.windowIndex}: previous ${state.storedPrevious}, current ${state.storedCurrent}; now previous ${state.previous} x ${state.weight} + current ${state.current} = ${state.estimate} of ${policy.limit}`;
  }
  if ('tatMs' in state) {
    const unit = policy.algorithm === 'tokenBucket' ? 'tokens' : 'units';
    const full = state.aheadMs > 0 ? `full again in ${formatDuration(state.aheadMs)}` : 'full';
    return `TAT ${when(state.tatMs)} (${formatNumber(state.tatMs, 3)} ms): ${state.used} ${unit} in use, ${state.available} of ${policy.limit} available, ${full}`;
  }
  if ('lastToken' in state) {
    const next = state.nextExpiryMs === null ? '' : `, the next lapses ${when(state.nextExpiryMs)}`;
    const lapsed = state.lapsed > 0 ? `, ${state.lapsed} lapsed unreleased (freed by the next call)` : '';
    return `${state.held} of ${policy.limit} slots held by ${state.leases} leases${next}${lapsed}; last fencing token ${state.lastToken}`;
  }
  const range =
    state.oldestMs === null || state.newestMs === null
      ? ''
      : `, oldest ${when(state.oldestMs)}, newest ${when(state.newestMs)}`;
  return `${state.entries} entries, ${state.inWindow} inside the window${range}`;
}

/** The text report. */
export function inspectTextReport(report: InspectReport, policy: Policy): string {
  const { next } = report;
  const verdict = next.allowed
    ? `allowed, ${next.remainingAfter} remaining after it`
    : `denied, retry after ${formatDuration(next.retryAfterMs)} (${next.retryAfterMs} ms)`;
  const lines = [`limiter  ${report.limiter}: ${report.policy}`, `key      ${report.key}`];
  if (report.state === null) {
    lines.push('state    none: a fresh identifier with a full allowance');
  } else {
    const raw =
      typeof report.raw === 'string'
        ? JSON.stringify(report.raw)
        : `${(report.raw as unknown[] | null)?.length ?? 0} entries`;
    lines.push(`stored   ${report.type} ${raw}`);
    lines.push(`state    ${describe(report.state, policy, report.serverTimeMs)}`);
    lines.push(
      `TTL      ${report.ttlMs === null ? 'none (this key never expires: run sluice audit)' : `${formatDuration(report.ttlMs)} (${report.ttlMs} ms)`}`,
    );
  }
  lines.push(
    `next     cost ${next.cost}: ${verdict}; limit ${next.limit}, reset in ${formatDuration(next.resetMs)} (from limiter.peek: nothing consumed)`,
  );
  return lines.join('\n');
}
