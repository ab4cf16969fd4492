// The experiment's load generator, run in its own process: open-loop arrivals on a fixed schedule, answers recorded.
import { Agent, request } from 'node:http';

/** What the parent asks for (as JSON in argv[2]). */
export interface LoadPlan {
  readonly url: string;
  readonly arrivalsPerSecond: number;
  readonly durationMs: number;
  /** Class names and their shares, summing to 1. */
  readonly mix: readonly [string, number][];
}

/** One answer: when it was sent (ms from the start), its class index, status, latency, and whether it had Retry-After. */
export type Answer = [sentMs: number, priority: number, status: number, latencyMs: number, retryAfter: 0 | 1];

function main(): void {
  const plan = JSON.parse(process.argv[2] as string) as LoadPlan;
  const agent = new Agent({ keepAlive: true, maxSockets: Number.POSITIVE_INFINITY });
  const answers: Answer[] = [];
  const gapMs = 1000 / plan.arrivalsPerSecond;
  const total = Math.floor(plan.durationMs / gapMs);
  // A fixed pattern of classes (deterministic, evenly spread): every run sends the same mix.
  let credit = plan.mix.map(() => 0);
  const classOf = (): number => {
    credit = credit.map((value, index) => value + (plan.mix[index] as [string, number])[1]);
    let best = 0;
    for (let index = 1; index < credit.length; index += 1) {
      if ((credit[index] as number) > (credit[best] as number)) best = index;
    }
    credit[best] = (credit[best] as number) - 1;
    return best;
  };
  let sent = 0;
  let settled = 0;
  const start = performance.now();
  const send = (): void => {
    const priority = classOf();
    const sentMs = performance.now() - start;
    const call = request(
      `${plan.url}/work`,
      { agent, headers: { 'x-priority': (plan.mix[priority] as [string, number])[0] } },
      (response) => {
        response.resume();
        response.on('end', () => {
          const retryAfter = response.headers['retry-after'] === undefined ? 0 : 1;
          answers.push([
            sentMs,
            priority,
            response.statusCode ?? 0,
            performance.now() - start - sentMs,
            retryAfter,
          ]);
          settled += 1;
          if (settled === total) finish();
        });
      },
    );
    call.on('error', () => {
      answers.push([sentMs, priority, 0, performance.now() - start - sentMs, 0]);
      settled += 1;
      if (settled === total) finish();
    });
    call.end();
  };
  // Open loop: each tick sends every arrival that is due, whether or not earlier ones were answered.
  const timer = setInterval(() => {
    const due = Math.min(total, Math.floor((performance.now() - start) / gapMs) + 1);
    while (sent < due) {
      sent += 1;
      send();
    }
    if (sent >= total) clearInterval(timer);
  }, 1);
  const finish = (): void => {
    agent.destroy();
    process.send?.(answers, () => process.exit(0));
  };
}

main();
