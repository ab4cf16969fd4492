// How a decision reaches a Node response (node:http, and Express and Fastify, which sit on it): headers, refusal, settling.
import type { ServerResponse } from 'node:http';
import { type Allowed, type DenialInfo, denialInfo, type Evaluation } from './handle.js';
import type { ProblemRefusal } from './problem.js';
import { countNodeBody } from './settle.js';

/** Sets each header on a Node response (replacing what an earlier limiter wrote: it re-renders all items). */
export function setNodeHeaders(response: ServerResponse, headers: Record<string, string>): void {
  if (response.headersSent) return;
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
}

/** The refusal's headers minus its Content-Type, for a denial handler that sends its own body. */
export function withoutContentType(headers: Record<string, string>): Record<string, string> {
  const { 'Content-Type': _contentType, ...rest } = headers;
  return rest;
}

/** Sends the default refusal: status, headers, problem+json body. */
export function sendNodeRefusal(response: ServerResponse, refusal: ProblemRefusal): void {
  if (response.headersSent) {
    response.end();
    return;
  }
  response.statusCode = refusal.status;
  setNodeHeaders(response, refusal.headers);
  response.setHeader('Content-Length', Buffer.byteLength(refusal.body));
  response.end(refusal.body);
}

/**
 * Calls the evaluation's `finished` once the response finished, or closed before finishing
 * (counted as failed), or at once when its client already went away, with `given` (the response the `settle` option is given: the framework's
 * own) and the bytes of the body when they are wanted.
 */
export function finishOnEnd(response: ServerResponse, evaluation: Allowed, given: unknown = response): void {
  const finished = evaluation.finished;
  if (finished === undefined) return;
  const bytes = evaluation.countsBytes ? countNodeBody(response) : () => 0;
  // Its client went away while the limiters decided (its 'close' came before this): at once.
  if (response.destroyed || response.socket?.destroyed === true) {
    finished(response.statusCode, response.writableFinished, given, bytes());
    return;
  }
  response.once('finish', () => finished(response.statusCode, true, given, bytes()));
  response.once('close', () => finished(response.statusCode, response.writableFinished, given, bytes()));
}

/** Applies an evaluation to a Node response; `true` when the request may go on. */
export async function applyToNodeResponse<Req, Res extends ServerResponse>(
  evaluation: Evaluation,
  request: Req,
  response: Res,
  onDenied: ((request: Req, response: Res, info: DenialInfo) => void | Promise<void>) | undefined,
): Promise<boolean> {
  if (evaluation.kind === 'skip') return true;
  if (evaluation.kind === 'allow') {
    setNodeHeaders(response, evaluation.headers);
    finishOnEnd(response, evaluation);
    return true;
  }
  if (onDenied === undefined) {
    sendNodeRefusal(response, evaluation.refusal);
    return false;
  }
  response.statusCode = evaluation.refusal.status;
  setNodeHeaders(response, withoutContentType(evaluation.refusal.headers));
  await onDenied(request, response, denialInfo(evaluation));
  return false;
}
