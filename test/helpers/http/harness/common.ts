// What every test app wires the same way, whatever the framework: options from a scenario, the routes' answers.
import request from 'supertest';
import type { KeyExtractor } from '../../../../src/http/client-key.js';
import { bodyBytes } from '../../../../src/http/index.js';
import type { RateLimitOptions } from '../../../../src/http/options.js';
import { SluiceError } from '../../../../src/index.js';
import type { Harness, Scenario } from '../conformance.js';

/** Options that do not depend on the framework's request, passed as they are. */
export type SharedOptions = Pick<
  RateLimitOptions<never>,
  | 'ban'
  | 'block'
  | 'headers'
  | 'partitionKey'
  | 'warnings'
  | 'onWarning'
  | 'missingKey'
  | 'allow'
  | 'deny'
  | 'metrics'
> & { readonly key?: KeyExtractor };

/** What `/stream` sends, in two chunks written apart: 150 bytes. */
export const STREAMED = ['x'.repeat(100), 'y'.repeat(50)] as const;

/** Requests to these paths are not limited: `/health` and the admin routes that inspect or reset a client. */
export function isSkipped(path: string): boolean {
  return path === '/health' || path.startsWith('/admin/');
}

/**
 * The options of a scenario for a framework whose requests are read with `header` and `path`:
 * cost from `x-cost`, skip for {@link isSkipped}, an async key from `x-client` and an async limit
 * from `x-limit` when the scenario asks for them; `settle` from `x-actual`, or the body's bytes.
 */
export function commonOptions<Req>(
  scenario: Scenario,
  header: (request: Req, name: string) => string | undefined,
  path: (request: Req) => string,
): RateLimitOptions<Req> {
  const later = <T>(value: T): Promise<T> => new Promise((resolve) => setImmediate(() => resolve(value)));
  return {
    limiter: scenario.limiter,
    cost: (request) => Number(header(request, 'x-cost') ?? 1),
    skip: (request) => isSkipped(path(request)),
    ...(scenario.count === undefined ? {} : { count: scenario.count }),
    ...(scenario.settle === 'header'
      ? { settle: (request: Req) => Number(header(request, 'x-actual')) }
      : {}),
    ...(scenario.settle === 'bytes' ? { settle: bodyBytes() } : {}),
    ...(scenario.keyByHeader === true ? { key: (request: Req) => later(header(request, 'x-client')) } : {}),
    ...(scenario.limitByHeader === true
      ? {
          limit: (request: Req) => {
            const value = header(request, 'x-limit');
            return later(value === undefined ? undefined : Number(value));
          },
        }
      : {}),
    ...scenario.shared,
  };
}

/** What the test apps answer for an error that reached the framework: the SluiceError's code. */
export function errorCode(error: unknown): string {
  return error instanceof SluiceError ? error.code : `error: ${String(error)}`;
}

/** A harness's `send` over supertest: an app, a request listener, or the URL of a listening server. */
export function supertestSend(target: Parameters<typeof request>[0]): Harness['send'] {
  const agent = request(target);
  return async (path, headers = {}) => {
    const response = await agent.get(path).set(headers);
    return { status: response.status, headers: response.headers, body: response.text };
  };
}
