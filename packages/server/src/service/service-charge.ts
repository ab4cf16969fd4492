// POST /v1/charge, /v1/reserve and /v1/settle: usage known after the response, for callers in any language.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Decision, Limiter } from 'sluice';
import type { HeaderStyle } from 'sluice/http';
import { limiterPipeline, newSettleId, settleReserved } from 'sluice/internal';
import { errorText } from '../cli/errors.js';
import type { Route, ServiceOptions } from './service.js';
import {
  answer,
  badRequest,
  bodyObject,
  countField,
  decide,
  decisionMembers,
  describe,
  keyField,
  quote,
  readBody,
  rejectionOf,
  type Served,
  sendJson,
  servedPolicies,
  servedPolicy,
} from './service-limit.js';

/** What the routes of this file share: the policies served, and who hears of store failures. */
interface ChargeRouteOptions {
  readonly limiters: ReadonlyMap<string, Limiter>;
  readonly headers: readonly HeaderStyle[];
  readonly failed: (error: unknown) => void;
}

type Handler = (request: IncomingMessage, response: ServerResponse) => Promise<void>;

/** The fields of a body: the ones named, and no other. */
function onlyFields(fields: Record<string, unknown>, names: readonly string[]): void {
  for (const name in fields) {
    if (!names.includes(name)) {
      throw badRequest(
        `Unknown field ${quote(name)}; expected ${names.map((known) => `"${known}"`).join(', ')}.`,
      );
    }
  }
}

/** Reads a body of `names` and the policy and key it names. */
async function read(
  request: IncomingMessage,
  options: ChargeRouteOptions,
  policies: ReadonlyMap<string, Served>,
  example: string,
  names: readonly string[],
): Promise<{ fields: Record<string, unknown>; served: Served; key: string }> {
  const fields = bodyObject(await readBody(request), example);
  onlyFields(fields, names);
  const known = [...options.limiters.keys()].map((name) => JSON.stringify(name)).join(', ');
  return { fields, served: servedPolicy(fields, policies, known), key: keyField(fields) };
}

const CHARGE_EXAMPLE = '{"policy": "tokens", "key": "user-42", "amount": 350}';

/**
 * `POST /v1/charge`: takes `amount` whether or not it is there (into debt, up to the policy's
 * maxDebt) and answers 200 with the decision, its `debt` and `cutOff`; 503 when the store did not
 * record it (it may be sent again).
 */
function chargeHandler(options: ChargeRouteOptions): Handler {
  const policies = servedPolicies(options.limiters, options.headers);
  return async (request, response) => {
    const { fields, served, key } = await read(request, options, policies, CHARGE_EXAMPLE, [
      'policy',
      'key',
      'amount',
    ]);
    const amount = countField(fields, 'amount', undefined);
    let decision: Decision;
    try {
      decision = await served.limiter.charge(key, amount);
    } catch (error) {
      throw rejectionOf(
        error,
        options.failed,
        'The charge was not recorded: the store failed. Send it again shortly.',
      );
    }
    const text = `{"policy":${served.nameJson},"key":${JSON.stringify(key)},"amount":${amount},${decisionMembers(decision)}}\n`;
    sendJson(response, text);
  };
}

const RESERVE_EXAMPLE = '{"policy": "tokens", "key": "user-42", "cost": 100}';

/**
 * `POST /v1/reserve`: what `POST /v1/limit` answers for the estimate `cost`, and, when allowed, the
 * `reservation` to send back to `/v1/settle` with the actual cost. Nothing is kept in the service.
 */
function reserveHandler(options: ChargeRouteOptions): Handler {
  const policies = servedPolicies(options.limiters, options.headers);
  return async (request, response) => {
    const { fields, served, key } = await read(request, options, policies, RESERVE_EXAMPLE, [
      'policy',
      'key',
      'cost',
    ]);
    const cost = countField(fields, 'cost', 1);
    const decision = await decide(served, key, cost, options.failed);
    // A reservation refused, or answered by the failure policy, took nothing: there is nothing to settle.
    const reservation =
      decision.allowed && decision.reason === undefined && decision.wouldAllow !== false
        ? `,"reservation":{"policy":${served.nameJson},"key":${JSON.stringify(key)},"reserved":${cost},"id":"${newSettleId()}"}`
        : '';
    answer(response, served, key, cost, decision, reservation);
  };
}

const SETTLE_EXAMPLE =
  '{"policy": "tokens", "key": "user-42", "reserved": 100, "id": "81237", "actual": 250}';

/** A reservation's `id` as /v1/reserve wrote it (a decimal whole number, 1 to 15 digits), or none. */
function settleIdField(fields: Record<string, unknown>): string | undefined {
  const id = fields.id;
  if (id === undefined) return undefined;
  if (typeof id !== 'string' || !/^[1-9][0-9]{0,14}$/.test(id)) {
    throw badRequest(
      `Expected "id" to be the reservation's id as /v1/reserve answered it, got ${describe(id)}.`,
    );
  }
  return id;
}

/**
 * `POST /v1/settle`: the reservation sent back with the actual cost. The difference is given back
 * (`actual` lower) or charged (higher, into debt); 200 with `difference` and the decision of the
 * refund or charge (none when equal). The store applies a reservation's settle once (by its `id`)
 * until the window it settled is over: sent again, by any instance, it changes nothing. A charge the
 * store did not record answers 503 (send it again).
 */
function settleHandler(options: ChargeRouteOptions): Handler {
  const policies = servedPolicies(options.limiters, options.headers);
  return async (request, response) => {
    const { fields, served, key } = await read(request, options, policies, SETTLE_EXAMPLE, [
      'policy',
      'key',
      'reserved',
      'id',
      'actual',
    ]);
    const reserved = countField(fields, 'reserved', undefined);
    const actual = countField(fields, 'actual', undefined, 0);
    const settleId = settleIdField(fields);
    const difference = actual - reserved;
    let members = '';
    try {
      const settled = await settleOn(served.limiter, key, reserved, actual, settleId);
      if (settled !== undefined) members = `,${decisionMembers(settled)}`;
    } catch (error) {
      throw rejectionOf(
        error,
        options.failed,
        'The settle was not recorded: the store failed. Send it again shortly.',
      );
    }
    const text = `{"policy":${served.nameJson},"key":${JSON.stringify(key)},"reserved":${reserved},"actual":${actual},"difference":${difference}${members}}\n`;
    sendJson(response, text);
  };
}

/** Settles on a limiter made by createLimiter() once per id; on another, as its own refund and charge do. */
function settleOn(
  limiter: Limiter,
  key: string,
  reserved: number,
  actual: number,
  settleId: string | undefined,
): Promise<Decision | undefined> {
  const pipeline = limiterPipeline(limiter);
  if (pipeline !== undefined) return settleReserved(pipeline, key, reserved, actual, settleId);
  const difference = actual - reserved;
  if (difference > 0) return limiter.charge(key, difference);
  return difference < 0 ? limiter.refund(key, -difference) : Promise.resolve(undefined);
}

/** What the routes of usage known after the response are built with. */
function chargeOptions(options: ServiceOptions): ChargeRouteOptions {
  return {
    limiters: options.limiters,
    headers: options.headers,
    failed: (error) => options.log.failed(errorText(error)),
  };
}

/** `POST /v1/charge`: usage known after the response, taken into debt if need be. */
export function chargeRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/charge',
    summary:
      '{"policy": "<name>", "key": "<whose quota>", "amount": 350} -> taken, past the limit if need be (debt)',
    handle: chargeHandler(chargeOptions(options)),
  };
}

/** `POST /v1/reserve`: an estimate taken now, with the reservation to settle. */
export function reserveRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/reserve',
    summary: '{"policy": "<name>", "key": "<whose quota>", "cost": 100} -> the decision and the reservation',
    handle: reserveHandler(chargeOptions(options)),
  };
}

/** `POST /v1/settle`: a reservation sent back with its actual cost. */
export function settleRoute(options: ServiceOptions): Route {
  return {
    method: 'POST',
    path: '/v1/settle',
    summary: '{"policy", "key", "reserved": 100, "actual": 250} -> the difference given back or charged',
    handle: settleHandler(chargeOptions(options)),
  };
}
