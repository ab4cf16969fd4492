// The HTTP service behind `sluice serve`: a route table (POST /v1/limit, policies, health, demo), problem+json refusals.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Limiter } from 'sluice';
import { type HeaderStyle, PROBLEM_CONTENT_TYPE, PROBLEM_TYPES } from 'sluice/http';
import { rateLimit } from 'sluice/node';
import type { Refusal, Ticket } from 'sluice/shed';
import { errorText } from '../cli/errors.js';
import type { ServiceGuard } from './guard.js';
import { clientError, fail, refuse } from './request-failures.js';
import type { RequestLog } from './request-log.js';
import { chargeRoute, reserveRoute, settleRoute } from './service-charge.js';
import { extendRoute, releaseRoute } from './service-leases.js';
import { limitRoute, quote, Rejection } from './service-limit.js';

export { type LimitAnswer, MAX_BODY_BYTES } from './service-limit.js';

/** One route: a method and an exact path, and what answers it. */
export interface Route {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  readonly path: string;
  /** One line for the index page (`GET /`); none keeps the route off it. */
  readonly summary?: string;
  /**
   * Answers the request. Throwing (or rejecting with) a {@link Rejection} answers its status with
   * a problem+json body; anything else answers 500 and is counted in the service's log. Returning
   * (or resolving to) `false` declines: the route this one replaced answers instead, or a 404.
   */
  readonly handle: (request: IncomingMessage, response: ServerResponse) => unknown;
  /**
   * Work the service's guard admits: under overload the request is refused 503 before its body is
   * read. The routes that decide are; health, metrics and the dashboard are not (they are cheap,
   * and an operator needs them most when the service is overloaded).
   */
  readonly guarded?: boolean;
}

export interface ServiceOptions {
  /** Policy name -> limiter; the name is what callers send as `policy`. */
  readonly limiters: ReadonlyMap<string, Limiter>;
  /** The limiter guarding `GET /demo`, keyed by client address. */
  readonly demo: Limiter | undefined;
  /** Header styles in answers and on the demo route. */
  readonly headers: readonly HeaderStyle[];
  /** Counts refused and failed requests, and writes a summary now and then rather than a line each. */
  readonly log: RequestLog;
  /**
   * More routes, from the parts of `sluice serve` that add them (metrics, a dashboard). One with
   * the method and path of a built-in route replaces it.
   * @default []
   */
  readonly routes?: readonly Route[];
  /** Admits the guarded routes' requests when the service has room; none takes every request. */
  readonly guard?: ServiceGuard | undefined;
}

/** The service: its request listener, and the server's handler for requests too broken to parse. */
export interface Service {
  readonly listener: RequestListener;
  /** For the server's 'clientError' event: a problem+json 400 (or 408, 431), counted, never logged one by one. */
  clientError(error: NodeJS.ErrnoException, socket: Duplex): void;
}

export { Rejection };

function sendText(response: ServerResponse, text: string): void {
  response.writeHead(200, {
    'Content-Type': 'text/plain; charset=utf-8',
    'Content-Length': Buffer.byteLength(text),
  });
  response.end(text);
}

/** `POST /v1/limit`: a decision for a policy and a key, with the headers to forward. */
function decisionRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/limit',
    summary:
      '{"policy": "<name>", "key": "<whose quota>", "cost": 1} -> the decision and headers (200 allowed, 429 denied)',
    handle: limitRoute(options.limiters, options.headers, (error) => options.log.failed(errorText(error))),
    guarded: true,
  };
}

/** `POST /v1/release`: frees a concurrency policy's lease. */
function leaseReleaseRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/release',
    summary:
      '{"policy": "<name>", "key": "<whose>", "lease": {...}} -> frees the lease /v1/limit gave (released: true)',
    handle: releaseRoute(options.limiters, options.headers, (error) => options.log.failed(errorText(error))),
  };
}

/** `POST /v1/extend`: renews a concurrency policy's lease. */
function leaseExtendRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/extend',
    summary:
      '{"policy": "<name>", "key": "<whose>", "lease": {...}, "leaseMs": 30000} -> renews it (extended: true)',
    handle: extendRoute(options.limiters, options.headers, (error) => options.log.failed(errorText(error))),
    guarded: true,
  };
}

/** `GET /v1/policies`: each policy's description, limit and window, rendered once. */
function policiesRoute({ limiters }: ServiceOptions): Route {
  const text = `${JSON.stringify(
    Object.fromEntries(
      [...limiters].map(([name, limiter]) => [
        name,
        {
          description: limiter.policy.description,
          limit: limiter.policy.limit,
          windowMs: limiter.policy.windowMs,
        },
      ]),
    ),
  )}\n`;
  return {
    method: 'GET',
    path: '/v1/policies',
    summary: `the policies: ${[...limiters.keys()].join(', ')}`,
    handle: (_, response) => {
      response.writeHead(200, {
        'Content-Type': 'application/json',
        'Content-Length': Buffer.byteLength(text),
      });
      response.end(text);
    },
  };
}

function healthRoute(): Route {
  return {
    method: 'GET',
    path: '/healthz',
    summary: 'ok',
    handle: (_, response) => sendText(response, 'ok\n'),
  };
}

/** `GET /demo`: a page behind the demo limiter, through the node:http middleware; none without one. */
function demoRoute({ demo, headers }: ServiceOptions): Route | undefined {
  if (demo === undefined) return undefined;
  const guard = rateLimit({ limiter: demo, headers: headers.length === 0 ? false : headers });
  const page = `Allowed by policy "${demo.name}" (${demo.policy.description}). Try again quickly.\n`;
  return {
    method: 'GET',
    path: '/demo',
    summary: `a page behind policy "${demo.name}", keyed by your address`,
    handle: async (request, response) => {
      if (await guard(request, response)) sendText(response, page);
    },
  };
}

/**
 * The routes every service has, in the order the index lists them: each entry builds its route
 * from the options, or none. A new operation of the service is one more entry here.
 */
const BUILT_IN_ROUTES: ReadonlyArray<(options: ServiceOptions) => Route | undefined> = [
  decisionRoute,
  // Giving back (a lease, a reservation's difference) is never refused: refused, it would hold
  // capacity longer, which is the opposite of what an overloaded service needs.
  leaseReleaseRoute,
  leaseExtendRoute,
  (options) => ({ ...chargeRoute(options), guarded: true }),
  (options) => ({ ...reserveRoute(options), guarded: true }),
  settleRoute,
  policiesRoute,
  healthRoute,
  demoRoute,
];

/** The index page: one line per route that has a summary. */
function indexRoute(routes: readonly Route[]): Route {
  const lines = routes
    .filter((route) => route.summary !== undefined)
    .map((route) => `  ${route.method.padEnd(4)} ${route.path.padEnd(13)} ${route.summary}`);
  const text = ['sluice rate-limit service', ...lines, ''].join('\n');
  return { method: 'GET', path: '/', handle: (_, response) => sendText(response, text) };
}

type Handler = Route['handle'];

/** `handle`, falling back to `replaced` when it declines (returns or resolves to `false`). */
function withFallback(handle: Handler, replaced: Handler): Handler {
  return (request, response) => {
    const result = handle(request, response);
    if (result === false) return replaced(request, response);
    if (result instanceof Promise) {
      return result.then((value) => (value === false ? replaced(request, response) : value));
    }
    return result;
  };
}

/** The 503 of a request the guard refused: the same bytes every time, made once. */
function overloadAnswer(retryAfterMs: number): { headers: Record<string, string | number>; body: string } {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const body = `${JSON.stringify({
    type: PROBLEM_TYPES.temporaryReducedCapacity,
    title: 'Service Unavailable',
    status: 503,
    detail: `The service is overloaded and refused this request before reading it. Retry in ${seconds} s.`,
  })}\n`;
  return {
    headers: {
      'Retry-After': String(seconds),
      'Content-Type': PROBLEM_CONTENT_TYPE,
      'Content-Length': Buffer.byteLength(body),
    },
    body,
  };
}

/**
 * `handle` behind the guard: admitted, its ticket goes back when the response closes (dropped when
 * the client went away first); refused, a 503 with Retry-After, its body left unread (node reads
 * and discards it, keeping the connection).
 */
function guardedHandler(guard: ServiceGuard, handle: Handler): Handler {
  const refused = overloadAnswer(guard.settings.retryAfterMs);
  // The requests admitted in this turn of the event loop, looked at together in its check phase
  // (see releaseIfBodyLate): one immediate per turn, not one per request.
  let requests: IncomingMessage[] = [];
  let tickets: Ticket[] = [];
  const look = (): void => {
    const [seen, given] = [requests, tickets];
    requests = [];
    tickets = [];
    for (let i = 0; i < seen.length; i++)
      releaseIfBodyLate(guard, seen[i] as IncomingMessage, given[i] as Ticket);
  };
  const start = (
    request: IncomingMessage,
    response: ServerResponse,
    admission: Ticket | Refusal,
  ): unknown => {
    if (!admission.allowed) {
      if (!response.headersSent) response.writeHead(503, refused.headers);
      response.end(refused.body);
      return undefined;
    }
    // A response closes once: `on` rather than `once`, which would wrap the listener in one more.
    response.on('close', () => guard.done(admission, !response.writableFinished));
    if (requests.length === 0) setImmediate(look);
    requests.push(request);
    tickets.push(admission);
    return handle(request, response);
  };
  return (request, response) => {
    const admission = guard.acquire('http');
    if (admission instanceof Promise) return admission.then((settled) => start(request, response, settled));
    return start(request, response, admission);
  };
}

/**
 * A body that did not come with its headers (by the loop's check phase, node has parsed whatever
 * arrived in the same read) is still on its way: the request gives its ticket back while it dawdles, so that clients
 * that hold requests open half-sent cannot take the whole limit and have the guard refuse everyone
 * else. Such a request is decided unguarded when its body comes (within the server's request timeout).
 */
function releaseIfBodyLate(guard: ServiceGuard, request: IncomingMessage, ticket: Ticket): void {
  if (!request.complete) guard.done(ticket);
}

/** Path -> method -> handler; HEAD is answered by GET's handler (node leaves the body out). */
function routeTable(
  routes: readonly Route[],
  guard: ServiceGuard | undefined,
): Map<string, Map<string, Handler>> {
  const table = new Map<string, Map<string, Handler>>();
  for (const route of routes) {
    const methods = table.get(route.path) ?? new Map<string, Handler>();
    table.set(route.path, methods);
    const replaced = methods.get(route.method);
    const own =
      guard !== undefined && route.guarded === true ? guardedHandler(guard, route.handle) : route.handle;
    // Only a route that replaces another pays for the fallback; the decision route is never wrapped.
    const handle = replaced === undefined ? own : withFallback(own, replaced);
    methods.set(route.method, handle);
    if (route.method === 'GET') methods.set('HEAD', handle);
  }
  return table;
}

/** The service's request listener and client-error handler. */
export function createService(options: ServiceOptions): Service {
  const routes = [...BUILT_IN_ROUTES.flatMap((build) => build(options) ?? []), ...(options.routes ?? [])];
  // The index lists what is there, added routes included; an added `GET /` replaces it.
  const table = routeTable([indexRoute(routes), ...routes], options.guard);
  return {
    listener: listener(table, options.log, listedPaths(routes)),
    clientError: clientError(options.log),
  };
}

/** The paths the index lists, for a 404 to point to. */
function listedPaths(routes: readonly Route[]): string {
  const listed = routes.filter((route) => route.summary !== undefined && route.path !== '/');
  return [...new Set(listed.map((route) => route.path))].join(', ');
}

function listener(table: Map<string, Map<string, Handler>>, log: RequestLog, paths: string): RequestListener {
  const missing = (path: string, methods: Map<string, Handler> | undefined): Rejection => {
    if (methods === undefined) {
      return new Rejection(404, 'Not Found', `No route ${quote(path)}; the routes are ${paths}.`);
    }
    const allowed = [...methods.keys()].join(', ');
    return new Rejection(405, 'Method Not Allowed', `${path} answers ${allowed} only.`, { Allow: allowed });
  };
  return (request, response) => {
    const url = request.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const methods = table.get(path);
    const handle = methods?.get(request.method ?? 'GET');
    if (handle === undefined) {
      refuse(log, request, response, missing(path, methods));
      return;
    }
    try {
      const pending = handle(request, response);
      if (pending === false) refuse(log, request, response, missing(path, undefined));
      else if (pending instanceof Promise) {
        pending.then(
          (value) => {
            if (value === false) refuse(log, request, response, missing(path, undefined));
          },
          (error: unknown) => fail(log, request, response, error),
        );
      }
    } catch (error) {
      fail(log, request, response, error);
    }
  };
}
