// The shed middleware's shared part: options, the 503 refusal, and releasing a ticket when a Node response ends.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { invalidOption } from '../errors.js';
import type { Admission, Refusal, Shedder, Ticket } from '../shed/index.js';
import { knownKeys, optionsObject } from '../validate.js';
import { PROBLEM_CONTENT_TYPE, PROBLEM_TYPES, type ProblemDetails } from './problem.js';
import { trackedResponse } from './settle.js';

/** Options of every adapter's `shed()`. */
export interface ShedOptions<Req> {
  /** The shedder whose tickets the requests take: `createShedder()` from `sluice/shed`. */
  readonly shedder: Shedder;
  /**
   * The request's class, one of the shedder's `priorities`; `undefined` for its default class.
   * @default () => undefined (every request of the shedder's default class)
   * @example (req) => (req.headers['x-priority'] === 'critical' ? 'critical' : 'default')
   */
  readonly priority?: (request: Req) => string | undefined;
}

/** The options after checks. */
export interface ResolvedShedOptions<Req> {
  readonly shedder: Shedder;
  readonly priority: ((request: Req) => string | undefined) | undefined;
}

/** Checks the options of an adapter's `shed()`. */
export function resolveShedOptions<Req>(name: string, options: ShedOptions<Req>): ResolvedShedOptions<Req> {
  const raw = optionsObject(`${name} options`, options, true);
  knownKeys(name, raw, ['shedder', 'priority']);
  const shedder = raw.shedder as Shedder | undefined;
  if (typeof shedder !== 'object' || shedder === null || typeof shedder.acquire !== 'function') {
    throw invalidOption('shedder', 'a shedder made by createShedder() from sluice/shed', shedder);
  }
  if (raw.priority !== undefined && typeof raw.priority !== 'function') {
    throw invalidOption('priority', 'a function of the request returning a class name', raw.priority);
  }
  return { shedder, priority: raw.priority as ResolvedShedOptions<Req>['priority'] };
}

/** Asks the shedder for a ticket for `request`: at once, or after its wait in the queue. */
export function admit<Req>(config: ResolvedShedOptions<Req>, request: Req): Admission | Promise<Admission> {
  const priority = config.priority === undefined ? undefined : config.priority(request);
  return config.shedder.acquire({ priority });
}

/** Everything a shed refusal sends. */
export interface ShedRefusal {
  readonly status: 503;
  readonly headers: Record<string, string>;
  readonly problem: ProblemDetails;
  readonly body: string;
}

/**
 * The 503 for a request the shedder refused: `Retry-After` in whole seconds (at least 1), and a
 * problem body of type temporary-reduced-capacity (the client did nothing wrong: the service is
 * short of capacity for now).
 *
 * @example
 * shedRefusal({ allowed: false, priority: 'sheddable', retryAfterMs: 1000 }).headers;
 * // { 'Retry-After': '1', 'Content-Type': 'application/problem+json' }
 */
export function shedRefusal(refusal: Refusal): ShedRefusal {
  const seconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1000));
  const problem: ProblemDetails = {
    type: PROBLEM_TYPES.temporaryReducedCapacity,
    title: 'Service Unavailable',
    status: 503,
    detail: `The service is at capacity for requests of priority "${refusal.priority}". Retry in ${seconds} s.`,
    'violated-policies': [],
    priority: refusal.priority,
  };
  return {
    status: 503,
    headers: { 'Retry-After': String(seconds), 'Content-Type': PROBLEM_CONTENT_TYPE },
    problem,
    body: JSON.stringify(problem),
  };
}

const DROPPED = Object.freeze({ dropped: true });

/**
 * Whether a response says the work failed for overload: a 5xx (a timeout, a 503 from what it
 * called). Those shrink the limit.
 */
export function droppedStatus(status: number): boolean {
  return status >= 500;
}

/** Releases `ticket` with what `status` says (a 5xx is dropped). */
export function releaseFor(ticket: Ticket, status: number): void {
  ticket.release(droppedStatus(status) ? DROPPED : undefined);
}

/**
 * Releases `ticket` when the Node response finishes (a 5xx counted as dropped), or when it closes
 * before finishing (its client went away: counted as dropped, since a client that gives up has
 * most often timed out).
 */
export function releaseOnNodeEnd(response: ServerResponse, ticket: Ticket): void {
  if (response.destroyed || response.socket?.destroyed === true) {
    ticket.release(DROPPED);
    return;
  }
  response.once('close', () => {
    if (response.writableFinished) releaseFor(ticket, response.statusCode);
    else ticket.release(DROPPED);
  });
}

/**
 * A ticket held by a web-standard request (fetch, Hono): given back when its response's body has
 * been read to its end, so that the latency the limit learns covers the whole response, a streamed
 * one included. Dropped when the request's signal aborts first (its client went away) or the body
 * is cancelled or fails; released once whichever comes first.
 */
export class WebTicket {
  readonly #ticket: Ticket;
  readonly #signal: AbortSignal | undefined;
  readonly #gone = (): void => this.drop();

  constructor(ticket: Ticket, signal: AbortSignal | undefined) {
    this.#ticket = ticket;
    this.#signal = signal;
    if (signal?.aborted === true) ticket.release(DROPPED);
    else signal?.addEventListener('abort', this.#gone, { once: true });
  }

  /** The response has ended with `status` (a 5xx is dropped), or is known and has no body to wait for. */
  complete(status: number): void {
    this.#signal?.removeEventListener('abort', this.#gone);
    releaseFor(this.#ticket, status);
  }

  /** The work failed for overload, or its client went away. */
  drop(): void {
    this.#signal?.removeEventListener('abort', this.#gone);
    this.#ticket.release(DROPPED);
  }

  /** The response to send in place of `response`: the same, whose body's end gives the ticket back. */
  respond(response: Response): Response {
    return trackedResponse(response, (status, completed) =>
      completed ? this.complete(status) : this.drop(),
    );
  }
}

/** Sends the 503 on a Node response. */
export function sendNodeShedRefusal(response: ServerResponse, refusal: Refusal): void {
  const sent = shedRefusal(refusal);
  if (response.headersSent) {
    response.end();
    return;
  }
  response.statusCode = sent.status;
  for (const [name, value] of Object.entries(sent.headers)) response.setHeader(name, value);
  response.setHeader('Content-Length', Buffer.byteLength(sent.body));
  response.end(sent.body);
}

/** Applies an admission to a Node response: `true` when the request may go on (its ticket released when it ends). */
function applyToNode(admission: Admission, response: ServerResponse): boolean {
  if (!admission.allowed) {
    sendNodeShedRefusal(response, admission);
    return false;
  }
  releaseOnNodeEnd(response, admission);
  return true;
}

/**
 * The shed guard on Node's request and response (node:http, and Express, Koa, Fastify and NestJS
 * through them): `true` when the request holds a ticket and may go on, `false` when it was
 * answered 503; a promise only while it waits in the shedder's queue. Throws what `priority` throws.
 */
export function nodeShed<Req>(
  config: ResolvedShedOptions<Req>,
  request: Req,
  response: ServerResponse,
): boolean | Promise<boolean> {
  const admission = admit(config, request);
  if (admission instanceof Promise) return admission.then((settled) => applyToNode(settled, response));
  return applyToNode(admission, response);
}

/** The Node middleware (Express, NestJS on either platform): the guard, then `next`. */
export function nodeShedMiddleware<Req extends IncomingMessage, Res extends ServerResponse>(
  config: ResolvedShedOptions<Req>,
): (request: Req, response: Res, next: (error?: unknown) => void) => void {
  return (request, response, next) => {
    let proceed: boolean | Promise<boolean>;
    try {
      proceed = nodeShed(config, request, response);
    } catch (error) {
      next(error);
      return;
    }
    if (proceed === true) next();
    else if (proceed !== false) proceed.then((go) => (go ? next() : undefined), next);
  };
}
