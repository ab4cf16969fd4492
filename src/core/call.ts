// One call on its way through the pipeline, and the checks that make it: identifier, cost, tag, limit, clock.
import { describeValue, ERROR_CODES, SluiceError } from '../errors.js';
import type { Decision, Operation, Policy, QueuedRequest, StoreResult } from '../types.js';
import type { Expiring } from './deadlines.js';
import type { Member } from './member.js';

const MAX_IDENTIFIER_BYTES = 1024;

const unsettled = (): void => {};

/**
 * A request to one limiter's store, with what the pipeline learns on the way. It is at once the
 * store's request and the deadline's entry, so a decision allocates one object of its own; a
 * limiter's in-process decisions reuse one (see Member.transientCall).
 */
export class Call implements QueuedRequest, Expiring {
  readonly member: Member;
  /** The limiter's policy, or its variant for this call's `limit`. */
  policy: Policy;
  readonly name: string;
  identifier: string;
  tag: string | undefined;
  operation: Operation;
  cost: number;
  now: number | undefined;
  /** When the call started, in the deny cache's time: the limiter's clock, or `performance.now()`. */
  startedAt = 0;
  /** The deny cache's epoch when the call started (see DenyCache.epoch). */
  epoch = 0;
  /** `performance.now()` when the store was asked, for `storeMs`. */
  askedAt = 0;
  /** The shard that decides the call; looked up only while some shard fails, or when it fails. */
  shard: string | undefined = undefined;
  /** This call is its shard's probe after a failure (see Health.admit). */
  probe = false;
  /** The store failure behind a decision of the failure policy. */
  error: SluiceError | undefined = undefined;
  deadline = 0;
  settled = false;
  /** Where the decision goes once the store answers, fails or runs out of time. */
  resolve: (decision: Decision) => void = unsettled;

  constructor(
    member: Member,
    policy: Policy,
    operation: Operation,
    identifier: string,
    cost: number,
    tag: string | undefined,
    now: number | undefined,
  ) {
    this.member = member;
    this.policy = policy;
    this.name = member.name;
    this.identifier = identifier;
    this.tag = tag;
    this.operation = operation;
    this.cost = cost;
    this.now = now;
  }

  /** Makes a finished call a new one (a limiter's in-process decisions reuse one object). */
  renew(
    policy: Policy,
    operation: Operation,
    identifier: string,
    cost: number,
    tag: string | undefined,
    now: number | undefined,
  ): this {
    this.policy = policy;
    this.identifier = identifier;
    this.tag = tag;
    this.operation = operation;
    this.cost = cost;
    this.now = now;
    this.startedAt = 0;
    this.epoch = 0;
    this.askedAt = 0;
    this.shard = undefined;
    this.probe = false;
    this.error = undefined;
    return this;
  }

  /** The store answered (see Store.enqueue); after the deadline the answer is dropped. */
  answer(result: StoreResult): void {
    if (this.member.deadlines.settle(this)) this.resolve(this.member.answered(this, result));
  }

  /** The store failed (see Store.enqueue); after the deadline the failure is dropped. */
  fail(error: unknown): void {
    if (this.member.deadlines.settle(this)) this.resolve(this.member.failed(this, 'store-error', error));
  }

  /** The deadline passed: the failure policy answers. */
  expire(): void {
    this.resolve(this.member.failed(this, 'timeout', undefined));
  }
}

/** Checks an identifier; `option` names it in the message. */
export function checkIdentifier(identifier: unknown, option = 'identifier'): SluiceError | undefined {
  if (typeof identifier !== 'string' || identifier.length === 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be a non-empty string, got ${describeValue(identifier)}.`,
    );
  }
  // UTF-8 takes at most 3 bytes per UTF-16 unit: only long strings need measuring.
  if (identifier.length * 3 > MAX_IDENTIFIER_BYTES && Buffer.byteLength(identifier) > MAX_IDENTIFIER_BYTES) {
    return new SluiceError(
      ERROR_CODES.INVALID_IDENTIFIER,
      `Expected \`${option}\` to be at most ${MAX_IDENTIFIER_BYTES} bytes of UTF-8, got ${Buffer.byteLength(identifier)} bytes.`,
    );
  }
  return undefined;
}

/** Checks a cost or refund amount against what the policy can grant. */
export function checkCost(option: string, cost: unknown, policy: Policy): SluiceError | undefined {
  if (typeof cost !== 'number' || !Number.isSafeInteger(cost) || cost < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_COST,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(cost)}.`,
    );
  }
  if (cost > policy.maxCost) {
    return new SluiceError(
      ERROR_CODES.COST_EXCEEDS_LIMIT,
      `Expected \`${option}\` to be at most ${policy.maxCost}, the most ${policy.description} can ever grant, got ${cost} (number).`,
    );
  }
  return undefined;
}

/** Checks a call's tag: absent, or a valid identifier (escaped into the key the same way). */
export function checkTag(tag: unknown): SluiceError | undefined {
  return tag === undefined ? undefined : checkIdentifier(tag, 'tag');
}

/** The policy for a call's `limit`: the limiter's own when absent, else its variant, or the error. */
export function policyFor(policy: Policy, limit: unknown, option = 'limit'): Policy | SluiceError {
  if (limit === undefined) return policy;
  if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 1) {
    return new SluiceError(
      ERROR_CODES.INVALID_LIMIT,
      `Expected \`${option}\` to be a positive integer, got ${describeValue(limit)}.`,
    );
  }
  if (policy.withLimit === undefined) {
    return new SluiceError(
      ERROR_CODES.INVALID_LIMIT,
      `Expected no \`${option}\` for ${policy.description}: the policy does not take a limit per call (it has no withLimit()).`,
    );
  }
  try {
    return policy.withLimit(limit);
  } catch (error) {
    if (error instanceof SluiceError) return error;
    throw error;
  }
}

/** Reads a limiter's clock, validated: milliseconds, `undefined` for the store's clock, or the error. */
export function readClock(clock: (() => number) | undefined): number | SluiceError | undefined {
  if (clock === undefined) return undefined;
  const value = clock();
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    return new SluiceError(
      ERROR_CODES.INVALID_CLOCK,
      `Expected \`clock\` to return a finite number of milliseconds of at least 0, got ${describeValue(value)}.`,
    );
  }
  return value;
}
