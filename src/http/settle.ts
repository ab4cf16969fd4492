// The middleware's `settle`: the actual cost once the response finished, with the body's bytes counted for `bodyBytes()`.
import type { ServerResponse } from 'node:http';
import { checkActual, type Grant } from '../core/index.js';

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
): Response {
  const source = response.body;
  if (source === null) {
    finished(response.status, true, given, 0);
    return response;
  }
  const reader = source.getReader();
  let bytes = 0;
  let ended = false;
  const end = (completed: boolean): void => {
    if (ended) return;
    ended = true;
    finished(response.status, completed, given, bytes);
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
        bytes += value.byteLength;
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
