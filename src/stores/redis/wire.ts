// A policy as the Redis scripts take it: which script decides it, and its parameters as arguments.
import type { Policy, StoredLimitRule } from '../../types.js';
import { DECISION_SCRIPTS } from './lua.generated.js';
import { SCRIPTS, type Script } from './scripts.js';

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
