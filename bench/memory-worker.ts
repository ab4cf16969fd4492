// Runs one in-process contender in a process of its own, so that it pays for no other contender's
// heap, timers (RateLimiterMemory keeps one per key) or compiled code; prints its LoadResult as JSON.
//   node --expose-gc build/bench/memory-worker.js <contender id> <warmupMs> <durationMs> <concurrency> <identifiers>
import { memoryContenders } from './contenders.js';
import { collectGarbage, runLoad } from './load.js';
import { metricsMemoryContenders } from './metrics.js';

async function main(): Promise<void> {
  const [id, warmupMs, durationMs, concurrency, count] = process.argv.slice(2);
  const contender = [...memoryContenders(), ...metricsMemoryContenders()].find((c) => c.id === id);
  if (contender === undefined) throw new Error(`No in-process contender ${id}`);
  const identifiers = Array.from({ length: Number(count) }, (_, i) => `user:${i}`);
  const load = { concurrency: Number(concurrency), identifiers, latency: false };
  const decider = contender.setup();
  // Twice over every identifier at least: state for each, and the code compiled.
  await runLoad(decider, { ...load, durationMs: Number(warmupMs), minDecisions: 2 * identifiers.length });
  collectGarbage();
  const result = await runLoad(decider, { ...load, durationMs: Number(durationMs) });
  process.stdout.write(JSON.stringify(result));
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
