// The gRPC server: envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health, on node:http2 directly.
// A general gRPC server spends most of a small unary call in its own layers (its measured ceiling here was about half
// of what node:http2 answers); this one reads the one message, decides, and writes one frame and the trailers.
import {
  constants,
  createServer,
  type Http2Server,
  type Http2Session,
  type IncomingHttpHeaders,
  type ServerHttp2Stream,
} from 'node:http2';
import { fromJSON, type MethodDefinition, type Options } from '@grpc/proto-loader';
import type { Refusal, Ticket } from 'sluice/shed';
import type { ServiceGuard } from '../service/guard.js';
import { type EnvoyBounds, messageTooLarge } from './bounds.js';
import { RESPONSE_HEADERS, refuseCall, reply, replyFramed } from './grpc-answers.js';
import { deadlineMs, encodeMessage, frame, STATUS, unframe } from './grpc-wire.js';
import { type RateLimitRequestMessage, RequestRefused, toWire, type WireResponse } from './messages.js';
import type { EnvoyMetrics } from './metrics.js';
import { PROTO_JSON } from './proto.generated.js';
import { decodeRequest } from './request-codec.js';
import { framedResponse } from './response-codec.js';
import type { EnvoyService } from './service.js';

/**
 * How messages are read: field names as in the .proto files, enums and 64-bit numbers as numbers,
 * and absent message fields as null (so an absent `hits_addend` differs from one set to 0).
 */
export const LOADER_OPTIONS: Options = { keepCase: true, longs: Number, enums: Number, defaults: true };

/** The names a health check may ask about: the server as a whole, the reference's, and the service's. */
export const HEALTH_SERVICES = ['', 'ratelimit', 'envoy.service.ratelimit.v3.RateLimitService'];

const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;
/** How often a Watch call looks at the health again. */
const WATCH_INTERVAL_MS = 1000;
/** The largest body read at all, as gRPC servers default to (4 MiB): past it, RESOURCE_EXHAUSTED. */
const MAX_RECEIVE_BYTES = 4 * 1024 * 1024;

type Method<Q, R> = MethodDefinition<Q, R>;

/** The services' methods, their codecs built from the embedded .proto files. */
export function loadServices(): {
  shouldRateLimit: Method<RateLimitRequestMessage, WireResponse>;
  check: Method<{ service?: string }, { status: number }>;
  watch: Method<{ service?: string }, { status: number }>;
} {
  const definition = fromJSON(PROTO_JSON as never, LOADER_OPTIONS);
  const service = (name: string): Record<string, unknown> =>
    definition[name] as unknown as Record<string, unknown>;
  const rateLimit = service('envoy.service.ratelimit.v3.RateLimitService');
  const health = service('grpc.health.v1.Health');
  return {
    shouldRateLimit: rateLimit.ShouldRateLimit as unknown as Method<RateLimitRequestMessage, WireResponse>,
    check: health.Check as unknown as Method<{ service?: string }, { status: number }>,
    watch: health.Watch as unknown as Method<{ service?: string }, { status: number }>,
  };
}

export interface GrpcOptions {
  readonly service: EnvoyService;
  /** `maxMessageBytes`: a larger message is refused before it is decoded. */
  readonly bounds: EnvoyBounds;
  /** Whether the service can answer: a config is loaded and the store answers. */
  readonly healthy: () => Promise<boolean>;
  readonly metrics: EnvoyMetrics | undefined;
  /** Admits ShouldRateLimit calls when the service has room (`serve --no-shed`: none, every call is taken). */
  readonly guard: ServiceGuard | undefined;
  /** Errors that are the service's, not the caller's. */
  readonly onError: (error: unknown) => void;
}

/** A started gRPC server. */
export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets calls in flight finish (up to `graceMs`), then cuts the rest. */
  close(graceMs: number): Promise<void>;
}

/**
 * Reads a unary call's body, keeping at most `maxBytes` past the prefix (the rest is counted, not
 * kept), then hands over the one message or answers why there is none.
 */
function readUnary(
  stream: ServerHttp2Stream,
  maxBytes: number,
  onMessage: (message: Buffer | number) => void,
): void {
  // A unary call's message comes in one chunk: a list is made only for a second one.
  let first: Buffer | undefined;
  let chunks: Buffer[] | undefined;
  let received = 0;
  stream.on('data', (chunk: Buffer) => {
    if (received <= maxBytes + 5) {
      if (first === undefined) first = chunk;
      else if (chunks === undefined) chunks = [first, chunk];
      else chunks.push(chunk);
    }
    received += chunk.length;
  });
  stream.once('end', () => {
    if (received > MAX_RECEIVE_BYTES) {
      refuseCall(
        stream,
        STATUS.RESOURCE_EXHAUSTED,
        `the request is ${received} bytes, more than ${MAX_RECEIVE_BYTES}`,
      );
      return;
    }
    const body = unframe(chunks ?? (first === undefined ? [] : [first]), received, maxBytes);
    if ('message' in body) onMessage(body.message);
    else if ('oversized' in body) onMessage(body.oversized);
    else refuseCall(stream, body.code, body.details);
  });
}

/** Serves one call; `answered`, when given, is called once the answer is written (not for a call cut short). */
type Handler = (stream: ServerHttp2Stream, answered?: () => void) => void;
/** What the router calls with a stream and its headers. */
type RouteHandler = (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void;

/** A call the guard refused: trailers-only RESOURCE_EXHAUSTED, with when to come back (gRPC's retry pushback). */
function overloadHeaders(retryAfterMs: number): Record<string, string | number> {
  return {
    ...RESPONSE_HEADERS,
    'grpc-status': String(STATUS.RESOURCE_EXHAUSTED),
    'grpc-message': encodeMessage(
      `the rate limit service is overloaded and refused this call before reading it; retry in ${retryAfterMs} ms`,
    ),
    'grpc-retry-pushback-ms': String(retryAfterMs),
  };
}

/**
 * `handler` behind the guard: a call is admitted (or refused RESOURCE_EXHAUSTED) before its
 * message is read, and its ticket goes back when the stream closes; a call whose caller went away
 * before the answer counts as dropped.
 */
function guarded(guard: ServiceGuard, handler: Handler): RouteHandler {
  const refusedHeaders = overloadHeaders(guard.settings.retryAfterMs);
  // The calls admitted in this turn of the event loop, looked at together in its check phase (see
  // releaseIfMessageLate): one immediate per turn, not one per call.
  let streams: ServerHttp2Stream[] = [];
  let tickets: Ticket[] = [];
  const look = (): void => {
    const [seen, given] = [streams, tickets];
    streams = [];
    tickets = [];
    for (let i = 0; i < seen.length; i++) {
      releaseIfMessageLate(guard, seen[i] as ServerHttp2Stream, given[i] as Ticket);
    }
  };
  const start = (stream: ServerHttp2Stream, admission: Ticket | Refusal): void => {
    if (!admission.allowed) {
      if (stream.destroyed || stream.headersSent) return;
      stream.respond(refusedHeaders, { endStream: true });
      stream.resume();
      return;
    }
    if (stream.destroyed) {
      guard.done(admission);
      return;
    }
    // The ticket goes back with the answer: the time it then takes to flush and close is not the work's.
    // A call that ends without one (reset, or refused while read) gives it back when the stream closes.
    // A stream closes once: `on` rather than `once`, which would wrap the listener in one more.
    stream.on('close', () => guard.done(admission, !stream.headersSent));
    handler(stream, () => guard.done(admission));
    if (streams.length === 0) setImmediate(look);
    streams.push(stream);
    tickets.push(admission);
  };
  return (stream, headers) => {
    const admission = guard.acquire('grpc', deadlineMs(headers['grpc-timeout']));
    if (admission instanceof Promise) admission.then((settled) => start(stream, settled));
    else start(stream, admission);
  };
}

/**
 * A call whose message did not come with its headers (by the loop's check phase, what arrived in the
 * same read has been read) gives its ticket back while it waits for it: callers that open calls and
 * never send them cannot take the whole limit. It is decided unguarded when its message comes.
 */
function releaseIfMessageLate(guard: ServiceGuard, stream: ServerHttp2Stream, ticket: Ticket): void {
  if (!stream.readableEnded) guard.done(ticket);
}

/** ShouldRateLimit: the service's answer, its refusals as gRPC statuses, anything else INTERNAL. */
function rateLimitHandler(
  options: GrpcOptions,
  method: Method<RateLimitRequestMessage, WireResponse>,
): Handler {
  const { service, metrics, bounds } = options;
  const answered = (stream: ServerHttp2Stream, done: (() => void) | undefined) => ({
    ok(response: Parameters<typeof toWire>[0]) {
      done?.();
      // Written directly (the codec's bytes, without its objects); the rare response with a body or metadata by the codec.
      replyFramed(stream, framedResponse(response) ?? frame(method.responseSerialize(toWire(response))));
    },
    failed(error: unknown) {
      done?.();
      if (error instanceof RequestRefused) {
        if (error.status === 'INVALID_ARGUMENT') metrics?.error('service_error');
        refuseCall(stream, STATUS[error.status], error.message);
        return;
      }
      options.onError(error);
      refuseCall(stream, STATUS.INTERNAL, 'the rate limit service failed on this call');
    },
  });
  return (stream, finished) => {
    readUnary(stream, bounds.maxMessageBytes, (message) => {
      const timer = metrics?.call('ShouldRateLimit');
      const done =
        finished === undefined || timer === undefined
          ? (finished ?? timer)
          : () => {
              timer();
              finished();
            };
      const answer = answered(stream, done);
      if (typeof message === 'number') {
        answer.failed(messageTooLarge(message, bounds));
        return;
      }
      let request: RateLimitRequestMessage;
      try {
        // Read directly (the codec's object for the same bytes); whatever the reader leaves, by the codec.
        request = decodeRequest(message) ?? method.requestDeserialize(message);
      } catch {
        done?.();
        metrics?.error('service_error');
        refuseCall(stream, STATUS.INTERNAL, 'the request message could not be decoded');
        return;
      }
      service.shouldRateLimit(request).then(answer.ok, answer.failed);
    });
  };
}

/** grpc.health.v1.Health: Check, and Watch (looked at again every second, written when it changes). */
function healthHandlers(
  options: GrpcOptions,
  services: ReturnType<typeof loadServices>,
): Record<string, RouteHandler> {
  const healthOf = async (name: string): Promise<number> => {
    if (!HEALTH_SERVICES.includes(name)) return SERVICE_UNKNOWN;
    return (await options.healthy()) ? SERVING : NOT_SERVING;
  };
  const nameIn = (
    message: Buffer | number,
    decode: (bytes: Buffer) => { service?: string },
  ): string | undefined => {
    if (typeof message === 'number') return undefined;
    try {
      return decode(message).service ?? '';
    } catch {
      return undefined;
    }
  };
  const { check, watch } = services;
  return {
    '/grpc.health.v1.Health/Check': (stream) =>
      readUnary(stream, 4096, (message) => {
        const name = nameIn(message, check.requestDeserialize);
        if (name === undefined) {
          refuseCall(stream, STATUS.INVALID_ARGUMENT, 'a health check request could not be read');
          return;
        }
        healthOf(name).then(
          (health) =>
            health === SERVICE_UNKNOWN
              ? refuseCall(stream, STATUS.NOT_FOUND, `unknown service ${JSON.stringify(name)}`)
              : reply(stream, check.responseSerialize({ status: health })),
          (error: unknown) => refuseCall(stream, STATUS.INTERNAL, String(error)),
        );
      }),
    '/grpc.health.v1.Health/Watch': (stream) =>
      readUnary(stream, 4096, (message) => {
        const name = nameIn(message, watch.requestDeserialize);
        if (name === undefined) {
          refuseCall(stream, STATUS.INVALID_ARGUMENT, 'a health check request could not be read');
          return;
        }
        let last = -1;
        stream.respond(RESPONSE_HEADERS);
        const look = (): void => {
          healthOf(name).then((health) => {
            if (stream.destroyed || health === last) return;
            last = health;
            stream.write(frame(watch.responseSerialize({ status: health })));
          }, options.onError);
        };
        const timer = setInterval(look, WATCH_INTERVAL_MS);
        stream.once('close', () => clearInterval(timer));
        look();
      }),
  };
}

/** A reset stream: the caller's; nothing is owed to it (one listener for every stream). */
function ignoreStreamError(): void {}

/** Routes a call by its path; what is not a gRPC call of these services is refused as gRPC and HTTP say. */
function router(
  routes: Readonly<Record<string, RouteHandler>>,
): (stream: ServerHttp2Stream, headers: IncomingHttpHeaders) => void {
  return (stream, headers) => {
    stream.on('error', ignoreStreamError);
    const contentType = headers[constants.HTTP2_HEADER_CONTENT_TYPE];
    if (typeof contentType !== 'string' || !contentType.startsWith('application/grpc')) {
      stream.respond({ [constants.HTTP2_HEADER_STATUS]: 415 }, { endStream: true });
      return;
    }
    const handler = routes[headers[constants.HTTP2_HEADER_PATH] as string];
    if (headers[constants.HTTP2_HEADER_METHOD] !== 'POST' || handler === undefined) {
      refuseCall(stream, STATUS.UNIMPLEMENTED, `no method ${String(headers[constants.HTTP2_HEADER_PATH])}`);
      stream.resume();
      return;
    }
    handler(stream, headers);
  };
}

/** Stops accepting, lets calls in flight finish (up to `graceMs`), then cuts the rest. */
function closeWithin(server: Http2Server, sessions: Set<Http2Session>, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    let left = sessions.size + 1;
    const closed = (): void => {
      if (--left === 0) {
        clearTimeout(cut);
        resolve();
      }
    };
    const cut = setTimeout(() => {
      for (const session of sessions) session.destroy();
      resolve();
    }, graceMs);
    server.close(closed);
    for (const session of sessions) session.close(closed);
  });
}

/** Starts the gRPC server on host:port (0 picks a free port). */
export async function startGrpc(options: GrpcOptions, host: string, port: number): Promise<GrpcServer> {
  const services = loadServices();
  const shouldRateLimit = rateLimitHandler(options, services.shouldRateLimit);
  const routes = {
    '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit':
      options.guard === undefined
        ? (stream: ServerHttp2Stream) => shouldRateLimit(stream)
        : guarded(options.guard, shouldRateLimit),
    ...healthHandlers(options, services),
  };
  // The session's memory bound covers the streams of a busy proxy's connection (Envoy multiplexes many calls on one).
  // With the guard, each connection also holds at most `streams` calls open (SETTINGS_MAX_CONCURRENT_STREAMS): a
  // client then keeps the rest until one is answered or refused, so what waits unread on this side, which no
  // limit of ours can see, stays a bounded batch instead of a backlog that every call would queue behind.
  const streams = options.guard?.settings.streams;
  const server = createServer({
    maxSessionMemory: 64,
    ...(streams === undefined ? {} : { settings: { maxConcurrentStreams: streams } }),
  });
  const sessions = new Set<Http2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    session.on('error', () => {
      // A broken connection is its client's: its streams end, the server goes on.
    });
  });
  server.on('sessionError', () => {});
  server.on('stream', router(routes));
  const bound = await new Promise<number>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve((server.address() as { port: number }).port);
    });
  });
  server.on('error', options.onError);
  return { port: bound, close: (graceMs) => closeWithin(server, sessions, graceMs) };
}
