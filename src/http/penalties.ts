// Penalties for clients that keep being refused: a block after a refusal, a ban after repeated ones.
// Each is a sluice limiter in the limiters' own store, so every process sees it and none keeps a key.
import { createHash } from 'node:crypto';
import { gcra } from '../algorithms/gcra.js';
import { slidingWindow } from '../algorithms/sliding-window.js';
import { type Group, groupFor, Pipeline, RateLimiter } from '../core/index.js';
import { invalidOption } from '../errors.js';
import { resolveLimiterOptions } from '../options.js';
import type { Decision, Limiter } from '../types.js';
import { durationMs, knownKeys, optionsObject } from '../validate.js';
import type { PolicyDecision } from './header-values.js';

/** Options of the middleware's `ban`. */
export interface BanOptions {
  /**
   * Refusals a client may collect within `windowMs`; the next refusal bans it. 0 bans at the
   * first refusal.
   */
  readonly after: number;
  /** The period refusals are counted over, in ms (a sliding window). */
  readonly windowMs: number;
  /** How long a ban lasts, in ms: every request of the client gets 403 meanwhile. */
  readonly durationMs: number;
}

/** Options of the middleware's `block`. */
export interface BlockOptions {
  /**
   * How long a refused client stays refused, in ms, whatever its limiters would say by then: a
   * client that ignores `Retry-After` gains nothing by retrying at once.
   */
  readonly durationMs: number;
}

/** The validated `ban` and `block` options. */
export interface PenaltySettings {
  readonly ban: BanOptions | undefined;
  readonly block: BlockOptions | undefined;
}

/** A penalty that answers a request: 403 for a ban, 429 for a block, and the decision explaining it. */
export interface PenaltyHold {
  readonly status: 403 | 429;
  readonly entry: PolicyDecision;
}

/** The `ban` and `block` options, validated; `undefined` when neither is given. */
export function resolvePenalties(ban: unknown, block: unknown): PenaltySettings | undefined {
  if (ban === undefined && block === undefined) return undefined;
  let banOptions: BanOptions | undefined;
  if (ban !== undefined) {
    const raw = optionsObject('ban', ban, true);
    knownKeys('ban', raw, ['after', 'windowMs', 'durationMs']);
    const after = raw.after;
    if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) {
      throw invalidOption('ban.after', 'a whole number of refusals of at least 0', after);
    }
    banOptions = {
      after,
      windowMs: durationMs('ban.windowMs', raw.windowMs),
      durationMs: durationMs('ban.durationMs', raw.durationMs),
    };
  }
  let blockOptions: BlockOptions | undefined;
  if (block !== undefined) {
    const raw = optionsObject('block', block, true);
    knownKeys('block', raw, ['durationMs']);
    blockOptions = { durationMs: durationMs('block.durationMs', raw.durationMs) };
  }
  return { ban: banOptions, block: blockOptions };
}

/** An identifier for the penalty limiters: the key, or its hash when it is too long for one. */
function penaltyIdentifier(key: string): string {
  if (key.length * 3 <= 1024 || Buffer.byteLength(key) <= 1024) return key;
  return `sha256:${createHash('sha256').update(key).digest('hex')}`;
}

/** The penalty limiters' names start with the names of the limiters they follow (`api+burst:ban`). */
function baseName(names: readonly string[]): string {
  const joined = names.join('+');
  if (joined.length <= 100) return joined;
  return `${names[0]?.slice(0, 60)}+${createHash('sha256').update(joined).digest('hex').slice(0, 12)}`;
}

/** A decision that has just started a penalty: refused from now for as long as it lasts. */
function started(decision: Decision): Decision {
  if (!decision.allowed) return decision;
  return { ...decision, allowed: false, remaining: 0, retryAfterMs: decision.resetMs };
}

/** The penalties that follow one group of limiters, on the first limiter's store and clock. */
export class Penalties {
  readonly #ban: Limiter | undefined;
  readonly #strikes: Limiter | undefined;
  readonly #block: Limiter | undefined;
  /** Ban and block, looked at side by side before the limiters decide. */
  readonly #held: Group;
  readonly #held403: readonly boolean[];

  constructor(group: Group, settings: PenaltySettings) {
    const first = group.pipelines[0] as Pipeline;
    const base = baseName(group.pipelines.map((pipeline) => pipeline.name));
    // The limiters' clock, so a test's clock moves penalties too; no deny cache: nothing per key in the process.
    const make = (suffix: string, policy: Limiter['policy']): Limiter => {
      const options = resolveLimiterOptions({
        store: first.store,
        policy,
        name: `${base}:${suffix}`,
        ...(first.clock === undefined ? {} : { clock: first.clock }),
        timeoutMs: first.timeoutMs,
        // A penalty the store cannot confirm is not imposed: the limiters still decide.
        onStoreError: 'allow',
      });
      return new RateLimiter(new Pipeline(options));
    };
    // One unit per duration (GCRA): taking it starts the penalty, and looking says how long it has left.
    const { ban, block } = settings;
    this.#ban = ban === undefined ? undefined : make('ban', gcra({ limit: 1, periodMs: ban.durationMs }));
    this.#strikes =
      ban === undefined || ban.after === 0
        ? undefined
        : make('strikes', slidingWindow({ limit: ban.after, windowMs: ban.windowMs }));
    this.#block =
      block === undefined ? undefined : make('block', gcra({ limit: 1, periodMs: block.durationMs }));
    const held = [this.#ban, this.#block].filter((limiter) => limiter !== undefined);
    this.#held = groupFor(held, { atomic: false });
    this.#held403 = held.map((limiter) => limiter === this.#ban);
  }

  /** The penalty a client is under, if any: a ban before a block. */
  async check(key: string): Promise<PenaltyHold | undefined> {
    const outcome = await this.#held.run('peek', penaltyIdentifier(key), undefined);
    for (let i = 0; i < outcome.decisions.length; i++) {
      const decision = outcome.decisions[i] as Decision;
      if (decision.allowed) continue;
      const pipeline = this.#held.pipelines[i] as Pipeline;
      return {
        status: this.#held403[i] === true ? 403 : 429,
        entry: { name: pipeline.name, windowMs: pipeline.policy.windowMs, decision },
      };
    }
    return undefined;
  }

  /**
   * The limiters refused a request: counts the refusal, and bans the client when it had too many
   * (each step one atomic call to the store), else blocks it when a block is set.
   */
  async refused(key: string): Promise<PenaltyHold | undefined> {
    const id = penaltyIdentifier(key);
    if (this.#ban !== undefined) {
      const strike = this.#strikes === undefined ? undefined : await this.#strikes.limit(id);
      if (strike === undefined || (!strike.allowed && strike.reason === undefined)) {
        const banned = await this.#ban.limit(id);
        if (banned.reason === undefined) return { status: 403, entry: this.#entry(this.#ban, banned) };
      }
    }
    if (this.#block === undefined) return undefined;
    const blocked = await this.#block.limit(id);
    return blocked.reason === undefined
      ? { status: 429, entry: this.#entry(this.#block, blocked) }
      : undefined;
  }

  /** Forgets the client's refusals, ban and block. */
  async reset(key: string): Promise<void> {
    const id = penaltyIdentifier(key);
    await Promise.all([this.#ban, this.#strikes, this.#block].map((limiter) => limiter?.reset(id)));
  }

  #entry(limiter: Limiter, decision: Decision): PolicyDecision {
    return { name: limiter.name, windowMs: limiter.policy.windowMs, decision: started(decision) };
  }
}

/** The penalties of each group, made once per group. */
export function penaltiesPerGroup(settings: PenaltySettings): (group: Group) => Penalties {
  const made = new WeakMap<Group, Penalties>();
  return (group) => {
    let penalties = made.get(group);
    if (penalties === undefined) {
      penalties = new Penalties(group, settings);
      made.set(group, penalties);
    }
    return penalties;
  };
}
