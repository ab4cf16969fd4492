// The wire of the decision script (lua/single.lua): a tick's requests grouped into script calls (one batch
// per policy and slot, each key's calls in order), a policy as the scripts take it,
// and a batch's arguments (its reply is read in reply.ts).

import { OPERATIONS, shapeOf } from '../../operations.js';
import type { Operation, Policy, StoredLimitRule, StoreReply, StoreRequest } from '../../types.js';
import { DECISION_SCRIPTS } from './lua.generated.js';
import { SCRIPTS, type Script } from './scripts.js';
import { keySlot } from './slot.js';
import { entryArguments, NO_ENTRIES } from './stored-entries.js';

/**
 * Requests with their keys and where each answer goes, in three parallel arrays: a decision adds
 * three slots, not an object of its own. The tick's queue is one; so is each batch.
 */
export interface Items {
  readonly requests: StoreRequest[];
  readonly keys: string[];
  readonly replies: StoreReply[];
}

/** Requests of one policy, operation and time, sent as one script call. */
export interface Batch extends Items {
  readonly policy: Policy;
  readonly operation: Operation;
  readonly now: number | undefined;
  /** What the script reads that operators stored (StoreRequest.storedReads): one value per call. */
  readonly storedReads: number;
  /** Work in the batch, for the log: one sorted-set insert per unit of cost plus four commands per key. */
  work: number;
  /** Sent (a batch may be sent before the flush ends, to keep a key's calls in order). */
  sent: boolean;
}

/**
 * The most log work one coalesced call may do: a log request costs about four commands and one
 * insert per unit, so a batch holds some fifty single-unit requests, and a request of cost 1000 goes
 * alone. Keeps every call within a few milliseconds of server time, out of SLOWLOG.
 */
const MAX_LOG_BATCH_WORK = 256;

/** The rules whose script inserts one sorted-set member per unit of cost (the log, the leases' slots). */
const PER_UNIT = new Set(['sliding-log', 'concurrency']);

/** Whether a flush holds calls of more than one policy. */
function mixedPolicies(requests: readonly StoreRequest[]): boolean {
  const first = requests[0]?.policy;
  for (const request of requests) if (request.policy !== first) return true;
  return false;
}

function newBatch(request: StoreRequest): Batch {
  const { policy, operation, now } = request;
  const storedReads = request.storedReads ?? 0;
  return { policy, operation, now, storedReads, requests: [], keys: [], replies: [], work: 0, sent: false };
}

/**
 * When a store sends its queued calls: idle, after this tick's promise continuations; busy (calls in flight: a server's
 * calls come each in a socket read of its own), after this turn's I/O, so that every read of the turn joins one batch.
 */
export function scheduleFlush(flush: () => void, busy: boolean): void {
  (busy ? setImmediate : process.nextTick)(flush);
}

/** Whether a request may join a batch: not sent, the same operation, time and stored reads, room left. */
function joins(batch: Batch, request: StoreRequest, maxBatch: number): boolean {
  return (
    !batch.sent &&
    batch.operation === request.operation &&
    batch.now === request.now &&
    batch.storedReads === (request.storedReads ?? 0) &&
    batch.requests.length < maxBatch &&
    (!PER_UNIT.has(request.policy.rule.name) || batch.work + request.cost + 4 <= MAX_LOG_BATCH_WORK)
  );
}

/** A batch's items grouped by key, each group in arrival order, as batches of their own. */
export function byKey(batch: Batch): Batch[] {
  const groups = new Map<string, Batch>();
  for (let i = 0; i < batch.keys.length; i++) {
    const key = batch.keys[i] as string;
    const request = batch.requests[i] as StoreRequest;
    let group = groups.get(key);
    if (group === undefined) {
      group = newBatch(request);
      groups.set(key, group);
    }
    add(group, request, key, batch.replies[i] as StoreReply);
  }
  return [...groups.values()];
}

/**
 * Hands `send` the batches of a tick's queue: the queue as one batch when every request may share
 * one call (one policy, operation and time, one slot, room for all; the common tick, sent without
 * copying a request), else regrouped.
 */
export function coalesce(
  queue: Items,
  cluster: boolean,
  maxBatch: number,
  send: (batch: Batch) => void,
): void {
  const { requests, keys } = queue;
  const first = requests[0];
  if (first === undefined) return;
  const { policy, operation, now } = first;
  const storedReads = first.storedReads ?? 0;
  const log = PER_UNIT.has(policy.rule.name);
  const slots = cluster && requests.length > 1;
  const slot = slots ? keySlot(keys[0] as string) : 0;
  let whole = requests.length <= maxBatch;
  let work = 0;
  for (let i = 0; whole && i < requests.length; i++) {
    const request = requests[i] as StoreRequest;
    work += request.cost + 4;
    whole =
      request.policy === policy &&
      request.operation === operation &&
      request.now === now &&
      (request.storedReads ?? 0) === storedReads &&
      (i === 0 || ((!log || work <= MAX_LOG_BATCH_WORK) && (!slots || keySlot(keys[i] as string) === slot)));
  }
  if (!whole) {
    regroup(queue, cluster, maxBatch, send);
    return;
  }
  // The shape newBatch() makes (a spread of the queue made another, and cost a Redis decision
  // some 20 µs of CPU in the client, measured one call after another).
  send({ policy, operation, now, storedReads, requests, keys, replies: queue.replies, work, sent: false });
}

/** Adds a request, its key and its reply to a batch. */
function add(batch: Batch, request: StoreRequest, key: string, reply: StoreReply): void {
  batch.requests.push(request);
  batch.keys.push(key);
  batch.replies.push(reply);
  batch.work += request.cost + 4;
}

/**
 * One open batch per policy and slot (on a cluster only keys of one slot may share a call). A
 * request that cannot join it (another operation or time, or a full batch) sends it first, so each
 * key sees its requests in the order they were made. Most ticks bring one policy and one slot: the
 * last batch is tried before the table, which is only made for a second one.
 */
function regroup(queue: Items, cluster: boolean, maxBatch: number, sendBatch: (batch: Batch) => void): void {
  const send = (batch: Batch): void => {
    batch.sent = true;
    sendBatch(batch);
  };
  const { requests, keys, replies } = queue;
  let open: Map<Policy, Map<number, Batch>> | undefined;
  let last: Batch | undefined;
  let lastSlot = 0;
  // Calls of one key under several policies (a per-call limit) must still run in order: a batch
  // holding an earlier call for the key is sent before the key's next call joins another.
  const lastBatch = mixedPolicies(requests) ? new Map<string, Batch>() : undefined;
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as StoreRequest;
    const key = keys[i] as string;
    const slot = cluster ? keySlot(key) : 0;
    let batch =
      last !== undefined && last.policy === request.policy && lastSlot === slot
        ? last
        : open?.get(request.policy)?.get(slot);
    if (batch === undefined || !joins(batch, request, maxBatch)) {
      if (batch !== undefined && !batch.sent) send(batch);
      batch = newBatch(request);
      if (last !== undefined && (last.policy !== request.policy || lastSlot !== slot)) {
        open ??= new Map([[last.policy, new Map([[lastSlot, last]])]]);
      }
      if (open !== undefined) {
        const bySlot = open.get(request.policy) ?? new Map<number, Batch>();
        open.set(request.policy, bySlot.set(slot, batch));
      }
    }
    if (lastBatch !== undefined) {
      const earlier = lastBatch.get(key);
      if (earlier !== undefined && earlier !== batch && !earlier.sent) send(earlier);
      lastBatch.set(key, batch);
    }
    add(batch, request, key, replies[i] as StoreReply);
    last = batch;
    lastSlot = slot;
  }
  if (open === undefined) {
    if (last !== undefined && !last.sent) send(last);
    return;
  }
  for (const bySlot of open.values()) for (const batch of bySlot.values()) if (!batch.sent) send(batch);
}

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

/** The cost every request of a batch asks for, or undefined when they differ. */
function sharedCost(requests: readonly StoreRequest[]): number | undefined {
  const cost = (requests[0] as StoreRequest).cost;
  for (let i = 1; i < requests.length; i++) if ((requests[i] as StoreRequest).cost !== cost) return undefined;
  return cost;
}

/** One script call for a batch of one policy and operation: the script, its arguments, the fields per record. */
export interface BatchCall {
  readonly script: Script;
  readonly args: string[];
  readonly fields: number;
}

/**
 * A batch's call (lua/single.lua). Slots 0 and 1 of `args` are the command and the script's name,
 * which the store fills; then the key count, the keys, the operation, the time, the policy's
 * parameters, one cost per key (or, when they are all the same and there are several keys, that cost
 * once as '*<cost>': each argument costs the client and the server about 0.1 µs to write and read),
 * each key's operands, what to read of the entries stored beside the keys, and the decision
 * function's name when it is not its script's own.
 */
export function batchCall(batch: Batch): BatchCall {
  const { requests, keys } = batch;
  // Made on a policy's first call (see wireOf), then read here.
  const wire = wires.get(batch.policy) ?? wireOf(batch.policy);
  const named = wire.named;
  const entry = OPERATIONS[batch.operation];
  // Only a lease policy's acquisition has a shape other than its operation's (see shapeOf).
  const shape = batch.policy.leaseMs === undefined ? entry : shapeOf(batch);
  const count = requests.length;
  const tail = batch.storedReads !== 0 ? entryArguments(batch.storedReads, wire) : NO_ENTRIES;
  const shared = count > 1 ? sharedCost(requests) : undefined;
  const costs = shared === undefined ? count : 1;
  const args: string[] = new Array(
    5 + count * (1 + shape.operands) + costs + wire.args.length + tail.length + (named === undefined ? 0 : 1),
  );
  args[2] = String(count);
  let at = 3;
  for (const key of keys) args[at++] = key;
  args[at++] = shape.wire;
  args[at++] = batch.now === undefined ? '' : String(batch.now);
  for (const arg of wire.args) args[at++] = arg;
  if (shared !== undefined) args[at++] = `*${shared}`;
  else
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
