// Answers sent together at the end of a turn of the event loop, after everything that turn read.

/** Sends one answer: ends an HTTP response with its body, or replies on a gRPC stream. */
export type TurnEndWrite<T, P> = (target: T, payload: P) => void;

/** What an answer is written to: anything that can be torn down if writing it fails. */
interface Destroyable {
  destroy(error?: Error): unknown;
}

// write, target, payload: three slots per answer, none an object of its own.
const queue: unknown[] = [];

/**
 * Queues an answer to be sent in this turn's check phase (one `setImmediate` for all the answers
 * of a turn), in the order they were queued.
 *
 * An answer written the moment it is decided goes out on its socket while the turn is still
 * reading the others' requests: the client is woken once per answer, and its next request comes
 * in a read of its own. Written together, the answers of a turn leave in one burst and the
 * clients' next requests come back together. Measured with wrk (64 connections, POST /v1/limit on
 * the memory store, alternating rounds on 2 cores): 39.7 against 27.4 µs of CPU per request, and
 * 25,300 against 37,400 requests/s, where a bare node:http server answering a constant made 36,600;
 * with h2load on ShouldRateLimit, 34.0 against 29.0 µs per call. No answer waits for a timer: the
 * check phase comes right after the reads of the turn that decided it, so a lone request is
 * answered as soon as before, and a busy turn's answers leave at its end rather than during it.
 *
 * A write that throws (it should not: each checks that its target is still open) tears down its
 * own target; the answers after it are still sent.
 */
export function writeAtTurnEnd<T extends Destroyable, P>(
  write: TurnEndWrite<T, P>,
  target: T,
  payload: P,
): void {
  if (queue.length === 0) setImmediate(flush);
  queue.push(write, target, payload);
}

function flush(): void {
  // Writes do not queue answers themselves; anything queued meanwhile would wait for the next turn.
  const count = queue.length;
  for (let i = 0; i < count; i += 3) {
    const target = queue[i + 1] as Destroyable;
    try {
      (queue[i] as TurnEndWrite<Destroyable, unknown>)(target, queue[i + 2]);
    } catch (error) {
      target.destroy(error instanceof Error ? error : new Error(String(error)));
    }
  }
  queue.splice(0, count);
  if (queue.length > 0) setImmediate(flush);
}
