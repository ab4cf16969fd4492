// A policy as the Redis scripts take it: which script decides it, and its parameters as arguments.
import { OPERATIONS, shapeOf } from '../../operations.js';
import type { Policy, StoredLimitRule } from '../../types.js';
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
  const shape = shapeOf(batch);
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
