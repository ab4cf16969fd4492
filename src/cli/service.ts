// The HTTP service behind `sluice serve`: POST /v1/limit for any language, and a demo route behind the limiter.
import type { IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import {
  type HeaderStyle,
  type PolicyDecision,
  PROBLEM_CONTENT_TYPE,
  problemDetails,
  rateLimitHeaders,
} from '../http/index.js';
import { rateLimit } from '../http/node.js';
import { type Decision, type Limiter, SluiceError } from '../index.js';
import type { AdminRoutes } from './dashboard/routes.js';

/** The largest request body read; limit requests are a few dozen bytes. */
export const MAX_BODY_BYTES = 16 * 1024;

const LIMIT_FIELDS = ['policy', 'key', 'cost'];

export interface ServiceOptions {
  /** Policy name -> limiter; the name is what callers send as `policy`. */
  readonly limiters: ReadonlyMap<string, Limiter>;
  /** The limiter guarding `GET /demo`, keyed by client address. */
  readonly demo: Limiter | undefined;
  /** Header styles in answers and on the demo route. */
  readonly headers: readonly HeaderStyle[];
  /** Receives errors that are the service's, not the caller's (a failing store). */
  readonly onError: (error: unknown) => void;
  /** The dashboard, its data and /metrics, asked first (they answer `false` for other paths). */
  readonly admin?: AdminRoutes;
}

/**
 * What `POST /v1/limit` answers, as JSON, with HTTP status 200 (allowed), 429 (denied) or 503 (denied
 * because the store failed and the policy fails closed). `reason` says when the store did not decide.
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

/** A problem+json answer for a request the service cannot take. */
class BadRequest extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
    readonly extraHeaders: Record<string, string> = {},
  ) {
    super(message);
  }
}

function sendJson(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
  contentType = 'application/json',
): void {
  const text = `${JSON.stringify(body, null, 2)}\n`;
  response.statusCode = status;
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
  response.setHeader('Content-Type', contentType);
  response.setHeader('Content-Length', Buffer.byteLength(text));
  response.end(text);
}

function sendProblem(response: ServerResponse, problem: BadRequest): void {
  sendJson(
    response,
    problem.status,
    { type: 'about:blank', title: problem.title, status: problem.status, detail: problem.message },
    problem.extraHeaders,
    PROBLEM_CONTENT_TYPE,
  );
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_BODY_BYTES) {
      reject(
        new BadRequest(
          413,
          'Content Too Large',
          `The body is ${declared} bytes; at most ${MAX_BODY_BYTES} are read.`,
        ),
      );
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        reject(new BadRequest(413, 'Content Too Large', `The body is over ${MAX_BODY_BYTES} bytes.`));
        request.pause();
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

function parseLimitRequest(
  text: string,
  limiters: ReadonlyMap<string, Limiter>,
): { limiter: Limiter; policy: string; key: string; cost: number } {
  const example = '{"policy": "api", "key": "client-42", "cost": 1}';
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    throw new BadRequest(
      400,
      'Bad Request',
      `The body is not JSON (${(error as Error).message}); expected ${example}.`,
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new BadRequest(
      400,
      'Bad Request',
      `Expected a JSON object such as ${example}, got ${Array.isArray(body) ? 'an array' : JSON.stringify(body)}.`,
    );
  }
  const fields = body as Record<string, unknown>;
  for (const name of Object.keys(fields)) {
    if (!LIMIT_FIELDS.includes(name)) {
      throw new BadRequest(
        400,
        'Bad Request',
        `Unknown field ${JSON.stringify(name)}; expected "policy", "key" and optionally "cost".`,
      );
    }
  }
  const known = [...limiters.keys()].map((name) => JSON.stringify(name)).join(', ');
  const limiter = typeof fields.policy === 'string' ? limiters.get(fields.policy) : undefined;
  if (limiter === undefined) {
    throw new BadRequest(
      400,
      'Bad Request',
      `Expected "policy" to be one of ${known}, got ${JSON.stringify(fields.policy) ?? 'nothing'}.`,
    );
  }
  if (typeof fields.key !== 'string') {
    throw new BadRequest(
      400,
      'Bad Request',
      `Expected "key" to be a non-empty string (whose quota: an API key, a user id, an address), got ${JSON.stringify(fields.key) ?? 'nothing'}.`,
    );
  }
  const cost = fields.cost ?? 1;
  if (typeof cost !== 'number') {
    throw new BadRequest(
      400,
      'Bad Request',
      `Expected "cost" to be a positive integer, got ${JSON.stringify(cost)}.`,
    );
  }
  return { limiter, policy: fields.policy as string, key: fields.key, cost };
}

/** The request listener of the service. */
export function createService(options: ServiceOptions): RequestListener {
  const { limiters, headers: style } = options;
  const demo =
    options.demo === undefined
      ? undefined
      : rateLimit({ limiter: options.demo, headers: style.length === 0 ? false : style });

  async function limit(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const { limiter, policy, key, cost } = parseLimitRequest(await readBody(request), limiters);
    let decision: Decision;
    try {
      decision = await limiter.limit(key, { cost });
    } catch (error) {
      if (
        error instanceof SluiceError &&
        error.code !== 'ERR_SLUICE_STORE' &&
        error.code !== 'ERR_SLUICE_BAD_REPLY'
      ) {
        // The caller's mistake: an empty key, a cost of 0, a cost above what the policy grants.
        throw new BadRequest(
          400,
          'Bad Request',
          error.message.replace('`identifier`', '"key"').replace('`cost`', '"cost"'),
        );
      }
      options.onError(error);
      throw new BadRequest(
        503,
        'Service Unavailable',
        'The rate limiter could not decide: its store failed. Retry shortly.',
        { 'Retry-After': '1' },
      );
    }
    const entries: PolicyDecision[] = [{ name: policy, windowMs: limiter.policy.windowMs, decision }];
    const headers = rateLimitHeaders(entries, { style });
    const problem = decision.allowed ? undefined : problemDetails(entries);
    const answer: LimitAnswer = {
      policy,
      key,
      cost,
      ...decision,
      headers,
      ...(problem === undefined ? {} : { problem }),
    };
    // A refusal the store did not make (a policy that fails closed while Redis is down) is the
    // service's trouble, not the client's overuse: 503, as the HTTP middleware answers.
    const failed = decision.reason === 'store-error' || decision.reason === 'timeout';
    sendJson(response, decision.allowed ? 200 : failed ? 503 : 429, answer, headers);
  }

  function policies(response: ServerResponse): void {
    sendJson(
      response,
      200,
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
    );
  }

  async function route(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const path = (request.url ?? '/').split('?')[0] ?? '/';
    const method = request.method ?? 'GET';
    const only = (allowed: string): void => {
      if (method !== allowed && !(allowed === 'GET' && method === 'HEAD')) {
        throw new BadRequest(405, 'Method Not Allowed', `${path} answers ${allowed} only.`, {
          Allow: allowed,
        });
      }
    };
    if (options.admin !== undefined && (await options.admin(request, response, path))) return;
    switch (path) {
      case '/v1/limit':
        only('POST');
        return limit(request, response);
      case '/v1/policies':
        only('GET');
        return policies(response);
      case '/healthz':
        only('GET');
        response.setHeader('Content-Type', 'text/plain; charset=utf-8');
        response.end('ok\n');
        return;
      case '/demo':
        only('GET');
        if (demo === undefined) throw new BadRequest(404, 'Not Found', 'No demo policy is configured.');
        if (await demo(request, response)) {
          response.setHeader('Content-Type', 'text/plain; charset=utf-8');
          response.end(
            `Allowed by policy "${options.demo?.name}" (${options.demo?.policy.description}). Try again quickly.\n`,
          );
        }
        return;
      case '/':
        only('GET');
        response.setHeader('Content-Type', 'text/plain; charset=utf-8');
        response.end(
          [
            'sluice rate-limit service',
            '  POST /v1/limit     {"policy": "<name>", "key": "<whose quota>", "cost": 1} -> the decision and headers (200 allowed, 429 denied)',
            `  GET  /v1/policies  the policies: ${[...limiters.keys()].join(', ')}`,
            options.demo === undefined
              ? ''
              : `  GET  /demo         a page behind policy "${options.demo.name}", keyed by your address`,
            '  GET  /healthz      ok',
            options.admin === undefined
              ? ''
              : '  GET  /            in a browser: the live dashboard; GET /metrics: Prometheus metrics',
            '',
          ]
            .filter((line, i, all) => line !== '' || i === all.length - 1)
            .join('\n'),
        );
        return;
      default:
        throw new BadRequest(
          404,
          'Not Found',
          `No route ${path}; try POST /v1/limit, GET /v1/policies or GET /demo.`,
        );
    }
  }

  return (request, response) => {
    route(request, response).catch((error: unknown) => {
      if (response.headersSent) {
        response.end();
        return;
      }
      if (error instanceof BadRequest) {
        // A body left unread would hold the connection: the answer closes it instead.
        if (!request.complete) response.setHeader('Connection', 'close');
        sendProblem(response, error);
        return;
      }
      options.onError(error);
      sendProblem(
        response,
        new BadRequest(500, 'Internal Server Error', 'The service failed on this request.'),
      );
    });
  };
}
