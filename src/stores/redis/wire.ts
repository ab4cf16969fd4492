// The wire of a decision script (lua/single.lua): a policy as the scripts take it, a batch's arguments, and
// the reply, checked whole, then turned into one result per key.

import { withFields } from '../../copy.js';
import { OPERATIONS, shapeOf } from '../../operations.js';
import type { Policy, StoredLimitRule, StoreReply, StoreRequest, StoreResult } from '../../types.js';
import type { Batch } from './coalesce.js';
import { DECISION_SCRIPTS } from './lua.generated.js';
import { SCRIPTS, type Script } from './scripts.js';
import { entryArguments, NO_ENTRIES } from './stored-entries.js';

/** What a decision call of one policy sends besides its keys, costs and operands (lua/single.lua). */
export interface PolicyWire {
  /** The script that holds the policy's decision function. */
  readonly script: Script;
  /** The function's name when it is not its script's own: the call names it last. */
  readonly named: string | undefined;
  /** The rule's name, as the combined script's dispatch table knows it (lua/all.lua). */
  readonly name: string;
  /** The two parameters, as text Lua's tonumber reads back exactly. */
  readonly args: readonly string[];
  /** How a stored limit scales them (lua/stored.lua): rule, own limit, share, x, y, follows. */
  readonly limitRule: readonly string[];
}

/** A policy that takes no stored limit: the rule the scripts read, never applied. */
const NO_RULE: readonly string[] = Object.freeze(['', '1', '1', '0', '0', '0']);

function limitRule(rule: StoredLimitRule | undefined): readonly string[] {
  if (rule === undefined) return NO_RULE;
  const [x, y] =
    rule.kind === 'count'
      ? [rule.most, 0]
      : rule.kind === 'rate'
        ? [rule.periodMs, rule.burst]
        : [rule.refillPerSecond, 0];
  const follows = rule.followsLimit ? '1' : '0';
  return Object.freeze([rule.kind, String(rule.limit), String(rule.share), String(x), String(y), follows]);
}

// Policies are made once and kept (variants included, see withLimits): their text is made once too.
const wires = new WeakMap<Policy, PolicyWire>();

/** The policy's wire form, made on its first call and kept with it. */
export function wireOf(policy: Policy): PolicyWire {
  let wire = wires.get(policy);
  if (wire === undefined) {
    const { name, parameters, storedLimit } = policy.rule;
    const script = SCRIPTS[DECISION_SCRIPTS[name]];
    wire = Object.freeze({
      script,
      named: script.name === name ? undefined : name,
      name,
      args: Object.freeze(parameters.map(String)),
      limitRule: limitRule(storedLimit),
    });
    wires.set(policy, wire);
  }
  return wire;
}

/** Costs up to 100 as text, made once. */
const COSTS = Array.from({ length: 101 }, (_, i) => String(i));

/** One script call for a batch of one policy and operation: the script, its arguments, the fields per record. */
export interface BatchCall {
  readonly script: Script;
  readonly args: string[];
  readonly fields: number;
}

/**
 * A batch's call (lua/single.lua). Slots 0 and 1 of `args` are the command and the script's name,
 * which the store fills; then the key count, the keys, the operation, the time, the policy's
 * parameters, one cost per key, each key's operands, what to read of the entries stored beside the
 * keys, and the decision function's name when it is not its script's own.
 */
export function batchCall(batch: Batch): BatchCall {
  const { requests, keys } = batch;
  const wire = wireOf(batch.policy);
  const named = wire.named;
  const entry = OPERATIONS[batch.operation];
  // Only a lease policy's acquisition has a shape other than its operation's (see shapeOf).
  const shape = batch.policy.leaseMs === undefined ? entry : shapeOf(batch);
  const count = requests.length;
  const tail = batch.storedReads !== 0 ? entryArguments(batch.storedReads, wire) : NO_ENTRIES;
  const args: string[] = new Array(
    5 + count * (2 + shape.operands) + wire.args.length + tail.length + (named === undefined ? 0 : 1),
  );
  args[2] = String(count);
  let at = 3;
  for (const key of keys) args[at++] = key;
  args[at++] = shape.wire;
  args[at++] = batch.now === undefined ? '' : String(batch.now);
  for (const arg of wire.args) args[at++] = arg;
  for (const request of requests) {
    const cost = request.cost;
    args[at++] = cost < COSTS.length ? (COSTS[cost] as string) : String(cost);
  }
  if (shape.operands > 0)
    for (const request of requests) {
      // A request made without its operation's operands (a refund's settle) carries the defaults.
      const operands = request.operands ?? entry.operandsOf?.(request.policy) ?? [];
      for (const operand of operands) args[at++] = operand;
    }
  for (const arg of tail) args[at++] = arg;
  if (named !== undefined) args[at] = named;
  return { script: wire.script, args, fields: shape.fields };
}

/** GCRA's packed allowed record: -1 - 2 x (reset x PACK + remaining), see lua/single.lua. */
const PACK = 1_048_576;

/** An allowed record too large to pack, as text: 'reset remaining'. */
const OWN_TEXT = /^(\d+) (\d+)$/;

/**
 * The values a record's decision takes (see lua/single.lua), from its first; 0 for anything else.
 * Packed (the reply's first value < 0): every allowed record is one value.
 */
function recordLength(head: unknown, packed: boolean): number {
  if (typeof head === 'string') return packed && OWN_TEXT.test(head) ? 1 : 0;
  if (typeof head !== 'number' || !Number.isSafeInteger(head)) return 0;
  if (head >= 0) return 1;
  if ((-1 - head) % 2 === 0) return packed ? 1 : 2;
  return 3;
}

/** Whether the reply holds `count` records, each followed by `fields` integers, and nothing else. */
function wellFormed(values: readonly unknown[], count: number, fields: number): boolean {
  const first = values[0];
  if (typeof first !== 'number') return false;
  const packed = first < 0;
  let at = 1;
  for (let i = 0; i < count; i++) {
    const length = recordLength(values[at], packed);
    if (length === 0) return false;
    for (let k = 1; k < length + fields; k++) if (typeof values[at + k] !== 'number') return false;
    at += length + fields;
  }
  return at === values.length;
}

/**
 * Answers each request of a batch with its record of the script's reply (lua/single.lua), through
 * its reply, in order: one value for an allowed key (two in the unpacked form when its reset is not
 * the batch's shared one), three for a denied one; then, for an operation whose entry has `fields`,
 * that many integers (the result's `fields`); then, for a batch that reads what operators stored,
 * one (the result's `stored` when not 0). Checks the whole reply first: false, answering nothing,
 * when it does not hold one record per request.
 */
export function answerRecords(
  reply: unknown,
  requests: readonly StoreRequest[],
  replies: readonly StoreReply[],
  fields: number,
  stored = false,
): boolean {
  if (!Array.isArray(reply)) return false;
  const values = reply as unknown[];
  const count = requests.length;
  if (!wellFormed(values, count, stored ? fields + 1 : fields)) return false;
  const first = values[0] as number;
  const packed = first < 0;
  const shared = packed ? -1 - first : first;
  let at = 1;
  for (let i = 0; i < count; i++) {
    const head = values[at] as number | string;
    let result: StoreResult;
    if (typeof head === 'string') {
      const [, reset, remaining] = OWN_TEXT.exec(head) as RegExpExecArray;
      result = { allowed: true, remaining: Number(remaining), resetMs: Number(reset), retryAfterMs: 0 };
      at += 1;
    } else if (head >= 0) {
      result = { allowed: true, remaining: head, resetMs: shared, retryAfterMs: 0 };
      at += 1;
    } else if ((-1 - head) % 2 === 0) {
      if (packed) {
        const both = (-1 - head) / 2;
        const remaining = both % PACK;
        result = { allowed: true, remaining, resetMs: (both - remaining) / PACK, retryAfterMs: 0 };
        at += 1;
      } else {
        result = {
          allowed: true,
          remaining: values[at + 1] as number,
          resetMs: (-1 - head) / 2,
          retryAfterMs: 0,
        };
        at += 2;
      }
    } else {
      result = {
        allowed: false,
        remaining: values[at + 1] as number,
        resetMs: (-2 - head) / 2,
        retryAfterMs: values[at + 2] as number,
      };
      at += 3;
    }
    if (fields > 0) {
      result = withFields(result, { fields: values.slice(at, at + fields) as number[] });
      at += fields;
    }
    if (stored) {
      const applied = values[at] as number;
      if (applied !== 0) result = withFields(result, { stored: applied });
      at += 1;
    }
    (replies[i] as StoreReply).answered(requests[i] as StoreRequest, result);
  }
  return true;
}
