// POST /v1/limit, the service's hot path: read the body, check it, decide, answer with the decision and headers.
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type Decision, ERROR_CODES, isStoreFailure, type Limiter, SluiceError } from 'sluice';
import { type HeaderStyle, type PolicyDecision, problemDetails } from 'sluice/http';
import { describeValue, errorDocs, hasLeaseFields } from 'sluice/internal';
import { headerRenderer, type RenderedHeaders } from './service-headers.js';
import { writeAtTurnEnd } from './turn-end.js';

/** The largest request body read; limit requests are a few dozen bytes. */
export const MAX_BODY_BYTES = 16 * 1024;

const EXAMPLE = '{"policy": "api", "key": "client-42", "cost": 1}';

/** Where the library's errors for a bad key and a bad cost are explained: the same rules apply here. */
const KEY_DOCS = errorDocs(ERROR_CODES.INVALID_IDENTIFIER);
const COST_DOCS = errorDocs(ERROR_CODES.INVALID_COST);
const LIMIT_DOCS = errorDocs(ERROR_CODES.INVALID_LIMIT);

/** A request the service will not take: answered with `status` and a problem+json body. */
export class Rejection extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    readonly extraHeaders: Readonly<Record<string, string>> = {},
  ) {
    super(message);
  }
}

/** A client's text in a message: at most 40 characters of it, escaped as JSON. */
export function quote(text: string): string {
  return JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text);
}

/** What a client sent, for a message: a short quoted prefix of a string, else its type (never the whole value). */
export function describe(value: unknown): string {
  return typeof value === 'string' ? quote(value) : describeValue(value);
}

export const badRequest = (message: string): Rejection => new Rejection(400, 'Bad Request', message);

/** A policy as the hot path needs it, prepared once. */
export interface Served {
  readonly name: string;
  readonly limiter: Limiter;
  /** The policy's name as a JSON string. */
  readonly nameJson: string;
  readonly headers: (decision: Decision, nowMs: number) => RenderedHeaders;
}

/**
 * What `POST /v1/limit` answers, as JSON, with HTTP status 200 (allowed), 429 (denied), 403 (the key
 * is denied: `sluice deny`) or 503 (denied because the store failed and the policy fails closed).
 * `reason` says when the store did not decide as usual.
 */
export interface LimitAnswer extends Decision {
  readonly policy: string;
  readonly key: string;
  readonly cost: number;
  /** The headers to forward to your client, the same ones this response carries. */
  readonly headers: Record<string, string>;
  /** When denied: the RFC 9457 body to send with your 429. */
  readonly problem?: object;
}

/** Reads the body, at most MAX_BODY_BYTES; most bodies arrive in one chunk, which is used as it is. */
export function readBody(request: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length']);
    if (declared > MAX_BODY_BYTES) {
      reject(
        new Rejection(
          413,
          'Content Too Large',
          `The body is ${declared} bytes; at most ${MAX_BODY_BYTES} are read.`,
        ),
      );
      return;
    }
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new Rejection(413, 'Content Too Large', `The body is over ${MAX_BODY_BYTES} bytes.`));
        request.pause();
        return;
      }
      if (first === undefined) first = chunk;
      else if (more === undefined) more = [first, chunk];
      else more.push(chunk);
    });
    request.on('end', () => resolve(more === undefined ? (first ?? Buffer.alloc(0)) : Buffer.concat(more)));
    request.on('error', reject);
  });
}

/**
 * A body as a JSON object, or the refusal naming what it is instead (`example` shows what is
 * expected). Messages describe what was sent by its type and a short escaped prefix only.
 */
export function bodyObject(body: Buffer, example: string): Record<string, unknown> {
  if (body.length === 0) throw badRequest(`The body is empty; expected ${example}.`);
  if (!isUtf8(body)) throw badRequest(`The body is not valid UTF-8; expected JSON such as ${example}.`);
  const text = body.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    // JSON.parse's own message quotes the input: say where it starts instead, briefly.
    throw badRequest(`The body is not JSON: it starts ${quote(text)}; expected ${example}.`);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw badRequest(`Expected a JSON object such as ${example}, got ${describe(parsed)}.`);
  }
  return parsed as Record<string, unknown>;
}

/** Refuses fields other than the `required` and `optional` ones. */
export function onlyFields(
  fields: Record<string, unknown>,
  required: readonly string[],
  optional: readonly string[],
): void {
  for (const name in fields) {
    if (!required.includes(name) && !optional.includes(name)) {
      const listed = required.map((field) => JSON.stringify(field)).join(', ');
      const more = optional.map((field) => JSON.stringify(field)).join(', ');
      throw badRequest(
        `Unknown field ${quote(name)}; expected ${listed}${more === '' ? '' : ` and optionally ${more}`}.`,
      );
    }
  }
}

/** The served policy a body's "policy" names, or the refusal listing the known ones. */
export function servedPolicy<S>(
  fields: Record<string, unknown>,
  policies: ReadonlyMap<string, S>,
  known: string,
): S {
  const served = typeof fields.policy === 'string' ? policies.get(fields.policy) : undefined;
  if (served === undefined) {
    throw badRequest(
      `Expected "policy" to be one of ${known}, got ${fields.policy === undefined ? 'nothing' : describe(fields.policy)}.`,
    );
  }
  return served;
}

/** A body's "key": a non-empty string of well-formed Unicode. */
export function keyField(fields: Record<string, unknown>): string {
  const { key } = fields;
  if (typeof key !== 'string' || key === '') {
    throw badRequest(
      `Expected "key" to be a non-empty string (whose quota: an API key, a user id, an address), got ${key === undefined ? 'nothing' : describe(key)}. See ${KEY_DOCS}`,
    );
  }
  // A lone surrogate has no UTF-8 form: two different keys would share one counter.
  if (/\p{Cs}/u.test(key)) {
    throw badRequest(
      `Expected "key" to be well-formed Unicode, got ${quote(key)} with a lone surrogate. See ${KEY_DOCS}`,
    );
  }
  return key;
}

/** A body's whole-number field `name` (absent: `absent`), at least `least`. */
export function countField(
  fields: Record<string, unknown>,
  name: string,
  absent: number | undefined,
  least = 1,
): number {
  // Absent means the default; null is not a number.
  const value = fields[name] === undefined ? absent : fields[name];
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < least) {
    const expected = least === 1 ? 'a positive integer' : `a whole number of at least ${least}`;
    throw badRequest(`Expected "${name}" to be ${expected}, got ${describe(value)}. See ${COST_DOCS}`);
  }
  return value;
}

/** Parses and checks a body of POST /v1/limit. */
function parseBody(
  body: Buffer,
  policies: ReadonlyMap<string, Served>,
  known: string,
): { served: Served; key: string; cost: number; limit: number | undefined } {
  const fields = bodyObject(body, EXAMPLE);
  for (const name in fields) {
    if (name !== 'policy' && name !== 'key' && name !== 'cost' && name !== 'limit') {
      throw badRequest(
        `Unknown field ${quote(name)}; expected "policy", "key" and optionally "cost" and "limit".`,
      );
    }
  }
  const served = servedPolicy(fields, policies, known);
  // A request's own quota, as a call's `limit`: it wins over the policy's and over a stored one.
  const { limit } = fields;
  if (limit !== undefined && (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1)) {
    throw badRequest(`Expected "limit" to be a positive integer, got ${describe(limit)}. See ${LIMIT_DOCS}`);
  }
  return { served, key: keyField(fields), cost: countField(fields, 'cost', 1), limit };
}

/**
 * A decision's members as JSON, without the braces, in the order the library sets them: what
 * `JSON.stringify(decision).slice(1, -1)` gives (a test holds it to that), written directly.
 */
export function decisionMembers(decision: Decision): string {
  // A lease's decision carries more members, in an order shadow mode and fallbacks vary: rare enough to stringify.
  if (hasLeaseFields(decision)) return JSON.stringify(decision).slice(1, -1);
  let text = `"allowed":${decision.allowed},"limit":${decision.limit},"remaining":${decision.remaining},"resetMs":${decision.resetMs},"retryAfterMs":${decision.retryAfterMs}`;
  if (decision.debt !== undefined) text += `,"debt":${decision.debt},"cutOff":${decision.cutOff ?? 0}`;
  if (decision.wouldAllow !== undefined) text += `,"wouldAllow":${decision.wouldAllow}`;
  if (decision.reason !== undefined) text += `,"reason":${JSON.stringify(decision.reason)}`;
  return text;
}

/** Builds the POST /v1/limit handler for these policies; `failed` hears of store failures. */
export function limitRoute(
  limiters: ReadonlyMap<string, Limiter>,
  styles: readonly HeaderStyle[],
  failed: (error: unknown) => void,
): (request: IncomingMessage, response: ServerResponse) => Promise<void> {
  const policies = servedPolicies(limiters, styles);
  const known = [...limiters.keys()].map((name) => JSON.stringify(name)).join(', ');
  const unanswered = (error: unknown): never => {
    throw rejectionOf(error, failed, UNAVAILABLE);
  };
  // Three promises per request (the body's, the limiter's and what answers it), none of an async function's.
  return (request, response) =>
    readBody(request).then((body) => {
      const { served, key, cost, limit } = parseBody(body, policies, known);
      return limitOf(served.limiter, key, cost, limit).then(
        (decision) => answer(response, served, key, cost, decision),
        unanswered,
      );
    });
}

/** Each policy with what its answers repeat, rendered once: its name as JSON, its header renderer. */
export function servedPolicies(
  limiters: ReadonlyMap<string, Limiter>,
  styles: readonly HeaderStyle[],
): Map<string, Served> {
  const policies = new Map<string, Served>();
  for (const [name, limiter] of limiters) {
    policies.set(name, {
      name,
      limiter,
      nameJson: JSON.stringify(name),
      headers: headerRenderer(
        name,
        limiter.policy.windowMs,
        styles,
        limiter.policy.unit,
        limiter.policy.leaseMs !== undefined,
      ),
    });
  }
  return policies;
}

export function decide(
  served: Served,
  key: string,
  cost: number,
  failed: (error: unknown) => void,
  limit?: number,
): Promise<Decision> {
  return answered(limitOf(served.limiter, key, cost, limit), failed);
}

/** The limiter's call for a key, a cost and a request's own limit: the defaults need no options object. */
function limitOf(limiter: Limiter, key: string, cost: number, limit: number | undefined): Promise<Decision> {
  if (limit !== undefined) return limiter.limit(key, { cost, limit });
  return cost === 1 ? limiter.limit(key) : limiter.limit(key, { cost });
}

const UNAVAILABLE = 'The rate limiter could not decide: its store failed. Retry shortly.';

/**
 * A limiter's answer, or the rejection a client reads: 400 for what the library refused of the
 * request (a cost above what the policy grants, a key too long, a lease it never gave), 503 when
 * the store failed.
 */
export function answered(decision: Promise<Decision>, failed: (error: unknown) => void): Promise<Decision> {
  return decision.then(undefined, (error: unknown) => {
    throw rejectionOf(error, failed, UNAVAILABLE);
  });
}

/**
 * What a call the limiter rejected answers: the caller's mistake the service could not see (a cost
 * above what the policy grants, a key too long) as 400; a store failure, heard by `failed`, as 503
 * with `unavailable` as its message.
 */
export function rejectionOf(
  error: unknown,
  failed: (error: unknown) => void,
  unavailable: string,
): Rejection {
  const stored = ['ERR_SLUICE_STORE', 'ERR_SLUICE_BAD_REPLY', 'ERR_SLUICE_TIMEOUT'];
  if (error instanceof SluiceError && !stored.includes(error.code)) {
    const message = error.message.replace('`identifier`', '"key"').replace('`cost`', '"cost"');
    return badRequest(
      message
        .replace('`amount`', '"amount"')
        .replace('`limit`', '"limit"')
        .replace('`lease`', '"lease"')
        .replace('`leaseMs`', '"leaseMs"'),
    );
  }
  failed(error);
  return new Rejection(503, 'Service Unavailable', unavailable, { 'Retry-After': '1' });
}

/**
 * Writes the decision with the request's fields, the headers to forward and, when denied, a problem;
 * `extra` is more members, each starting with a comma (a reservation to settle).
 */
export function answer(
  response: ServerResponse,
  served: Served,
  key: string,
  cost: number,
  decision: Decision,
  extra = '',
): void {
  const headers = served.headers(decision, Date.now());
  let problem = '';
  if (!decision.allowed) {
    const { policy } = served.limiter;
    const entries: PolicyDecision[] = [
      { name: served.name, windowMs: policy.windowMs, decision, concurrent: policy.leaseMs !== undefined },
    ];
    const details = problemDetails(entries);
    if (details !== undefined) problem = `,"problem":${JSON.stringify(details)}`;
  }
  // The decision's own members as the library made them, between the request's and the headers.
  const members = decisionMembers(decision);
  const text = `{"policy":${served.nameJson},"key":${JSON.stringify(key)},"cost":${cost},${members},"headers":${headers.json}${problem}${extra}}\n`;
  // A refusal the store did not make (a policy that fails closed while Redis is down) is the
  // service's trouble, not the client's overuse: 503, as the HTTP middleware answers.
  const status = decision.allowed
    ? 200
    : isStoreFailure(decision.reason)
      ? 503
      : decision.reason === 'denied'
        ? 403
        : 429;
  headers.flat.push('Content-Type', 'application/json', 'Content-Length', String(Buffer.byteLength(text)));
  // The head is only stored here; it leaves with the body, at the end of the turn (see writeAtTurnEnd).
  response.writeHead(status, headers.flat);
  writeAtTurnEnd(endWith, response, text);
}

/** Ends a response with its body, unless it was closed or ended meanwhile. */
function endWith(response: ServerResponse, text: string): void {
  if (!response.destroyed && !response.writableEnded) response.end(text);
}

/** Writes a JSON answer with status 200, with the turn's other answers (see writeAtTurnEnd). */
export function sendJson(response: ServerResponse, text: string): void {
  response.writeHead(200, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  writeAtTurnEnd(endWith, response, text);
}

/** The policy and key a body names, checked. */
export function target(
  fields: Record<string, unknown>,
  policies: ReadonlyMap<string, Served>,
  known: string,
): { served: Served; key: string } {
  return { served: servedPolicy(fields, policies, known), key: keyField(fields) };
}
