// POST /v1/release and POST /v1/extend: what a caller does with the lease POST /v1/limit gave it for a concurrency policy.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Decision, Lease, Limiter } from 'sluice';
import type { HeaderStyle } from 'sluice/http';
import {
  answered,
  badRequest,
  bodyObject,
  decisionMembers,
  onlyFields,
  readBody,
  type Served,
  sendJson,
  servedPolicies,
  target,
} from './service-limit.js';

type Handler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

const RELEASE_EXAMPLE =
  '{"policy": "reports", "key": "client-42", "lease": {"id": "...", "token": 1, "expiresAt": 0}}';
const EXTEND_EXAMPLE =
  '{"policy": "reports", "key": "client-42", "lease": {"id": "...", "token": 1, "expiresAt": 0}, "leaseMs": 30000}';

/** The request's lease, as the library checks it (an object from `POST /v1/limit`'s answer). */
function leaseOf(fields: Record<string, unknown>): Lease {
  if (fields.lease === undefined)
    throw badRequest('Expected "lease": the lease POST /v1/limit answered with.');
  return fields.lease as Lease;
}

/** Writes a decision about a lease with the request's fields: always 200, the decision says what happened. */
function answer(response: ServerResponse, served: Served, key: string, decision: Decision): void {
  const text = `{"policy":${served.nameJson},"key":${JSON.stringify(key)},${decisionMembers(decision)}}\n`;
  sendJson(response, text);
}

/** Builds a lease route's handler: parse, check, ask the limiter, answer. */
function leaseRoute(
  limiters: ReadonlyMap<string, Limiter>,
  styles: readonly HeaderStyle[],
  failed: (error: unknown) => void,
  act: (served: Served, key: string, fields: Record<string, unknown>) => Promise<Decision>,
  example: string,
  optional: readonly string[],
): Handler {
  const policies = servedPolicies(limiters, styles);
  const known = [...limiters.keys()].map((name) => JSON.stringify(name)).join(', ');
  return async (request, response) => {
    const fields = bodyObject(await readBody(request), example);
    onlyFields(fields, ['policy', 'key', 'lease'], optional);
    const { served, key } = target(fields, policies, known);
    const decision = await answered(act(served, key, fields), failed);
    answer(response, served, key, decision);
  };
}

/**
 * `POST /v1/release`: frees the slots of a lease. `released: false` when it had lapsed or was
 * released before: nothing changed.
 */
export function releaseRoute(
  limiters: ReadonlyMap<string, Limiter>,
  styles: readonly HeaderStyle[],
  failed: (error: unknown) => void,
): Handler {
  const release = (served: Served, key: string, fields: Record<string, unknown>) =>
    served.limiter.release(key, leaseOf(fields));
  return leaseRoute(limiters, styles, failed, release, RELEASE_EXAMPLE, []);
}

/**
 * `POST /v1/extend`: renews a live lease for `leaseMs` (at most, and by default, the policy's).
 * `extended: false` when it had lapsed or was released: nothing changed.
 */
export function extendRoute(
  limiters: ReadonlyMap<string, Limiter>,
  styles: readonly HeaderStyle[],
  failed: (error: unknown) => void,
): Handler {
  const extend = (served: Served, key: string, fields: Record<string, unknown>) =>
    served.limiter.extend(key, leaseOf(fields), fields.leaseMs as number | undefined);
  return leaseRoute(limiters, styles, failed, extend, EXTEND_EXAMPLE, ['leaseMs']);
}
