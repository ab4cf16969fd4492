// How a request's end settles what its limiters took: leases released (and renewed while it runs), count modes'
// refunds, the middleware's `settle` (the actual cost, with the body's bytes counted for `bodyBytes()`).
import type { ServerResponse } from 'node:http';
import { checkActual, type Grant } from '../core/index.js';
import type { Decision } from '../types.js';
import type { PolicyDecision } from './header-values.js';
import type { RateLimitInfo } from './info.js';
import type { ResolvedOptions } from './options.js';

/**
 * Called once a response finished (or closed before finishing: `completed` false), with what the
 * adapter knows of it: its status, the response object the `settle` option is given, and the bytes
 * of its body (counted only when a `settle` option may read them).
 */
export type Finished = (status: number, completed: boolean, response: unknown, bodyBytes: number) => void;

/** Bytes of each settled response's body, by the response object handed to `settle`. */
const bodies = new WeakMap<object, number>();

/**
 * A `settle` for the middleware that charges the bytes of the response's body: `cost` is then the
 * estimate taken before the handler runs, and the difference is given back or charged once the
 * body has been sent. The bytes are those the handler wrote, as the middleware sees them (before a
 * compression middleware mounted before it, after one mounted after it); a response closed early
 * counts what was written. Pair it with a policy of `unit: 'content-bytes'`.
 *
 * @example
 * import { bodyBytes } from 'sluice/http';
 * app.use(rateLimit({ limiter: bytesPerMinute, cost: 64 * 1024, settle: bodyBytes() }));
 */
export function bodyBytes(): (request: unknown, response: unknown) => number {
  return (_request, response) =>
    typeof response === 'object' && response !== null ? (bodies.get(response) ?? 0) : 0;
}

/** What the middleware's `settle` gives: the actual cost, checked, then the difference settled on every limiter. */
export async function settleResponse<Req>(
  settle: (request: Req, response: unknown) => number | Promise<number>,
  request: Req,
  response: unknown,
  bodyByteCount: number,
  grant: Grant,
): Promise<void> {
  if (typeof response === 'object' && response !== null) bodies.set(response, bodyByteCount);
  const actual = await settle(request, response);
  const invalid = checkActual(actual);
  if (invalid !== undefined) throw invalid;
  await grant.settle(actual);
}

/** The bytes of one chunk given to `write` or `end`. */
function chunkBytes(chunk: unknown, encoding: unknown): number {
  if (typeof chunk === 'string') {
    return Buffer.byteLength(chunk, typeof encoding === 'string' ? (encoding as BufferEncoding) : 'utf8');
  }
  if (chunk instanceof Uint8Array) return chunk.byteLength;
  return 0;
}

/**
 * Counts the bytes written to a Node response's body from now on: its `write` and `end` report
 * each chunk before passing it on. Returns the count so far.
 */
export function countNodeBody(response: ServerResponse): () => number {
  let bytes = 0;
  // An `end` that writes its chunk through `write` (a compression middleware's, a test server's)
  // counts it once.
  let ending = false;
  const write = response.write;
  const end = response.end;
  response.write = function counted(this: ServerResponse, chunk: unknown, ...rest: unknown[]) {
    if (!ending) bytes += chunkBytes(chunk, rest[0]);
    return (write as (...args: unknown[]) => boolean).call(this, chunk, ...rest);
  } as ServerResponse['write'];
  response.end = function counted(this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
    if (typeof chunk !== 'function' && !ending) bytes += chunkBytes(chunk, rest[0]);
    ending = true;
    try {
      return (end as (...args: unknown[]) => ServerResponse).call(this, chunk, ...rest);
    } finally {
      ending = false;
    }
  } as ServerResponse['end'];
  return () => bytes;
}

/**
 * The response to send in place of `response`: the same status, headers and body, whose end (or
 * cancellation, `completed` false) calls `finished` with `given` (the handler's response) and the
 * body's length. A streamed body (server-sent events from an upstream) finishes when its last chunk
 * has been read.
 */
export function trackedResponse(
  response: Response,
  finished: Finished,
  given: Response = response,
  sent: SentBody = sentBody(),
): Response {
  sent.response = given;
  const source = response.body;
  if (source === null) {
    finished(response.status, true, given, 0);
    return response;
  }
  const reader = source.getReader();
  let ended = false;
  const end = (completed: boolean): void => {
    if (ended) return;
    ended = true;
    finished(response.status, completed, given, sent.bytes);
  };
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) {
          controller.close();
          end(true);
          return;
        }
        sent.bytes += value.byteLength;
        controller.enqueue(value);
      } catch (error) {
        controller.error(error);
        end(false);
      }
    },
    cancel(reason) {
      end(false);
      return reader.cancel(reason);
    },
  });
  return new Response(body, response);
}

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
export async function giveBackTaken(
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
 * What is done once the response finished or its client went away (`completed` false): a lease
 * policy's leases released, and a count mode's refund, or else the `settle` option's actual cost
 * settled. While the response runs, its leases are renewed when `extendLeases` asks. `undefined`
 * when there is nothing to do.
 */
export function settler<Req>(
  config: ResolvedOptions<Req>,
  request: Req,
  state: RequestState,
  taken: Taken,
): Finished | undefined {
  const { count, settle } = config;
  const { grant } = taken;
  const leases = grant.holdsLeases;
  const counts = !(count === 'all' && settle === undefined) && !grant.empty;
  if (!leases && !counts) return undefined;
  const renewal = leases ? renewing(config, grant) : undefined;
  let done = false;
  return (status, completed, response, bodyBytes) => {
    if (done) return;
    done = true;
    if (renewal !== undefined) clearInterval(renewal);
    const failed = !completed || config.isFailure(status);
    if (counts && count !== 'all' && failed !== (count === 'failed')) {
      // The refund gives back the leases too.
      giveBackTaken(state, [taken]).catch(config.onRefundError);
      return;
    }
    if (leases) giveBackTaken(state, [taken], true).catch(config.onRefundError);
    if (counts && settle !== undefined) {
      settleResponse(settle, request, response, bodyBytes, grant).catch(config.onRefundError);
    }
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
 * What a web-standard response has sent of its body so far: the handler's response once it
 * answered, and the bytes its tracked body handed on (see trackedResponse).
 */
export interface SentBody {
  response: Response | undefined;
  bytes: number;
}

/** Nothing sent yet: the handler has not answered. */
export function sentBody(): SentBody {
  return { response: undefined, bytes: 0 };
}

/**
 * Settles when a web-standard request's client goes away (its signal aborts, as @hono/node-server,
 * Deno and Bun abort it), so that an aborted request does not hold its slots until they lapse. The
 * runtime aborts before it stops reading the body: what the body sent so far is settled (with the
 * handler's response, when it had answered), not nothing, so that hanging up mid-body does not
 * give back a byte quota's whole estimate.
 */
export function settleOnAbort(
  signal: AbortSignal | undefined,
  finished: Finished | undefined,
  sent: SentBody,
): void {
  if (finished === undefined || signal === undefined) return;
  const abort = (): void => finished(499, false, sent.response, sent.bytes);
  if (signal.aborted) {
    abort();
    return;
  }
  signal.addEventListener('abort', abort, { once: true });
}
