// The reference's HTTP twins: POST /json (ShouldRateLimit in JSON) and GET /healthcheck. The service serves GET /metrics.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { type EnvoyBounds, messageTooLarge } from './bounds.js';
import { RequestRefused, requestFromJson, responseToJson } from './messages.js';
import type { EnvoyMetrics } from './metrics.js';
import type { EnvoyService } from './service.js';

export interface EnvoyHttpOptions {
  readonly service: EnvoyService;
  readonly healthy: () => Promise<boolean>;
  /** `maxMessageBytes` bounds the body read. */
  readonly bounds: EnvoyBounds;
  /** Where a refused request is counted (`service_error`), as over gRPC. */
  readonly metrics: EnvoyMetrics | undefined;
  readonly onError: (error: unknown) => void;
}

function send(response: ServerResponse, statusCode: number, body: string, type = 'application/json'): void {
  response.statusCode = statusCode;
  response.setHeader('Content-Type', type);
  response.setHeader('Content-Length', Buffer.byteLength(body));
  response.end(body);
}

/** Reads the body, refusing it once it is past the bound (or declared past it), without reading on. */
function readBody(request: IncomingMessage, bounds: EnvoyBounds): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(request.headers['content-length']);
    if (declared > bounds.maxMessageBytes) {
      reject(messageTooLarge(declared, bounds));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > bounds.maxMessageBytes) {
        reject(messageTooLarge(undefined, bounds));
        request.pause();
        return;
      }
      chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

/**
 * A request listener for the Envoy routes; returns false for any other path, which the caller
 * then serves. `POST /json` answers 200 (OK), 429 (OVER_LIMIT), 400 (a bad request) or 503 (the
 * store failed, for rules that answer UNAVAILABLE); `GET /healthcheck` answers 200 `OK` or 500.
 */
export function envoyRoutes(
  options: EnvoyHttpOptions,
): (request: IncomingMessage, response: ServerResponse) => boolean {
  const { service } = options;
  async function json(request: IncomingMessage, response: ServerResponse): Promise<void> {
    try {
      const answer = await service.shouldRateLimit(requestFromJson(await readBody(request, options.bounds)));
      send(response, answer.overall_code === 2 ? 429 : 200, `${JSON.stringify(responseToJson(answer))}\n`);
    } catch (error) {
      if (!(error instanceof RequestRefused)) throw error;
      if (!request.complete) response.setHeader('Connection', 'close');
      if (error.status === 'INVALID_ARGUMENT') options.metrics?.error('service_error');
      const statusCode = error.status === 'INVALID_ARGUMENT' ? 400 : 503;
      send(response, statusCode, `${JSON.stringify({ error: error.message })}\n`);
    }
  }
  return (request, response) => {
    const path = (request.url ?? '/').split('?')[0];
    const method = request.method ?? 'GET';
    let work: Promise<void>;
    if (path === '/json' && method === 'POST') work = json(request, response);
    else if (path === '/healthcheck' && (method === 'GET' || method === 'HEAD')) {
      work = options
        .healthy()
        .then((ok) => send(response, ok ? 200 : 500, ok ? 'OK' : 'NOT_SERVING\n', 'text/plain'));
    } else return false;
    work.catch((error: unknown) => {
      options.onError(error);
      if (!response.headersSent)
        send(response, 500, `${JSON.stringify({ error: 'the service failed on this request' })}\n`);
      else response.end();
    });
    return true;
  };
}
