// What usage known after the response costs Redis: µs of server time per `charge` and per settle
// (its refund or its charge) beside a decision's, for every algorithm. An optional section of run.ts.
import { createLimiter, type Limiter, RedisStore } from '../src/index.js';
import { BENCH_TIMEOUT_MS, SLUICE_POLICIES, type SluicePolicy } from './contenders.js';
import { table } from './format.js';
import type { Section, SectionContext } from './section.js';
import { scriptTotals } from './server.js';

/** The operations measured: a decision (`limit` of 1), a charge, and the two halves a settle may be. */
const OPERATIONS = ['decision', 'charge', 'settle (refund)', 'settle (charge)'] as const;
type Measured = (typeof OPERATIONS)[number];

/** Calls in flight at once: a service's worth, so calls coalesce into batches as they do in production. */
const IN_FLIGHT = 64;
/** Identifiers the calls spread over, each built per call as a request's would be. */
const IDENTIFIERS = 10_000;
/** The estimate a reservation takes before its settle. */
const ESTIMATE = 5;

interface Row {
  readonly policy: string;
  readonly operation: Measured;
  readonly calls: number;
  /** Script `usec` (INFO commandstats) per operation. */
  readonly scriptUsec: number;
  /** redis-server CPU (user + system) per operation. */
  readonly cpuUsec: number;
}

export interface ChargeResult {
  readonly rows: Row[];
}

/** Runs `count` calls of `one`, `IN_FLIGHT` at a time. */
async function drive(count: number, one: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < count) await one(next++);
    }),
  );
}

/** Units a charge takes: 1 to 10, what usage beyond an estimate mostly is (the log's cost grows with it). */
const chargeOf = (i: number): number => 1 + (i % 10);

/** One call of the operation on identifier i. */
function operation(limiter: Limiter, measured: Measured, i: number): Promise<unknown> {
  const identifier = `user-${i % IDENTIFIERS}`;
  if (measured === 'decision') return limiter.limit(identifier);
  if (measured === 'charge') return limiter.charge(identifier, chargeOf(i));
  // A settle after a reservation of ESTIMATE: a refund of what was not used, or a charge of what was.
  if (measured === 'settle (refund)') return limiter.refund(identifier, ESTIMATE - 1);
  return limiter.charge(identifier, chargeOf(i));
}

async function measure(
  context: SectionContext,
  policy: SluicePolicy,
  measured: Measured,
  count: number,
): Promise<Row> {
  const { bench } = context;
  await bench.flush();
  const limiter = createLimiter({
    store: new RedisStore({ client: bench.client }),
    policy: policy.make(),
    name: 'bench',
    timeoutMs: BENCH_TIMEOUT_MS,
  });
  // Settles follow reservations: each identifier holds one estimate before the settles are timed.
  if (measured.startsWith('settle')) {
    await drive(IDENTIFIERS, (i) => limiter.limit(`user-${i}`, { cost: ESTIMATE }));
  }
  await bench.resetStats();
  const cpuBefore = await bench.cpuUsec();
  await drive(count, (i) => operation(limiter, measured, i));
  const cpu = (await bench.cpuUsec()) - cpuBefore;
  const scripts = scriptTotals(await bench.commandStats());
  return {
    policy: policy.label,
    operation: measured,
    calls: count,
    scriptUsec: scripts.usec / count,
    cpuUsec: cpu / count,
  };
}

export const section: Section<ChargeResult> = {
  name: 'charge',
  async run(context) {
    const count = context.quick ? 4_000 : 40_000;
    const rows: Row[] = [];
    for (const policy of SLUICE_POLICIES) {
      for (const measured of OPERATIONS) {
        const row = await measure(context, policy, measured, count);
        context.log(
          `charge: ${policy.label} ${measured}: ${row.scriptUsec.toFixed(2)} µs script, ${row.cpuUsec.toFixed(2)} µs CPU`,
        );
        rows.push(row);
      }
    }
    return { rows };
  },
  render(result) {
    const cell = (policy: string, measured: Measured): string => {
      const row = result.rows.find((r) => r.policy === policy && r.operation === measured);
      return row === undefined ? '–' : `${row.scriptUsec.toFixed(2)} (${row.cpuUsec.toFixed(2)})`;
    };
    const policies = [...new Set(result.rows.map((row) => row.policy))];
    return [
      '## What a charge and a settle cost Redis',
      '',
      table(
        ['policy', ...OPERATIONS.map((name) => `${name}: µs`)],
        policies.map((policy) => [policy, ...OPERATIONS.map((measured) => cell(policy, measured))]),
      ),
      '',
      `Server time per operation on the benchmark's redis-server: the scripts' \`usec\` from \`INFO commandstats\`, and in brackets the growth of the server's CPU time (which adds reading commands and writing replies), divided by the operations. ${IN_FLIGHT} calls in flight over ${IDENTIFIERS.toLocaleString('en-US')} identifiers, so calls coalesce into batches as in production. A charge takes 1 to 10 units (the sliding log adds an entry per unit, as a decision of that cost would); a settle follows a reservation of ${ESTIMATE}: the refund of what was not used, or the charge of what was used beyond it, and is one of the two, never both. A charge into debt runs the same script lines as one within the limit (the debt is the same arithmetic past the limit): the differential suite, not this table, covers that path.`,
      '',
    ];
  },
};
