// The decisions of one tick grouped into script calls: one batch per policy and slot, each key's calls in order.
import type { Operation, Policy, StoreReply, StoreRequest } from '../../types.js';
import { keySlot } from './slot.js';

/**
 * Requests with their keys and where each answer goes, in three parallel arrays: a decision adds
 * three slots, not an object of its own. The tick's queue is one; so is each batch.
 */
export interface Items {
  readonly requests: StoreRequest[];
  readonly keys: string[];
  readonly replies: StoreReply[];
}

export function noItems(): Items {
  return { requests: [], keys: [], replies: [] };
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

/** Whether a policy's script inserts one sorted-set member per unit of cost (the log, the leases' slots). */
function insertsPerUnit(policy: Policy): boolean {
  return policy.rule.name === 'sliding-log' || policy.rule.name === 'concurrency';
}

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

/** Whether a request may join a batch: not sent, the same operation, time and stored reads, room left. */
function joins(batch: Batch, request: StoreRequest, maxBatch: number): boolean {
  return (
    !batch.sent &&
    batch.operation === request.operation &&
    batch.now === request.now &&
    batch.storedReads === (request.storedReads ?? 0) &&
    batch.requests.length < maxBatch &&
    (!insertsPerUnit(request.policy) || batch.work + request.cost + 4 <= MAX_LOG_BATCH_WORK)
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
 * The queue as one batch, when every request may share one call (one policy, operation and time,
 * one slot, room for all): the common tick, sent without copying a request.
 */
function whole(queue: Items, cluster: boolean, maxBatch: number): Batch | undefined {
  const { requests, keys } = queue;
  const first = requests[0];
  if (first === undefined || requests.length > maxBatch) return undefined;
  const { policy, operation, now } = first;
  const storedReads = first.storedReads ?? 0;
  const log = insertsPerUnit(policy);
  const slots = cluster && requests.length > 1;
  const slot = slots ? keySlot(keys[0] as string) : 0;
  let work = 0;
  for (let i = 0; i < requests.length; i++) {
    const request = requests[i] as StoreRequest;
    work += request.cost + 4;
    if (
      request.policy !== policy ||
      request.operation !== operation ||
      request.now !== now ||
      (request.storedReads ?? 0) !== storedReads
    )
      return undefined;
    if (i > 0 && ((log && work > MAX_LOG_BATCH_WORK) || (slots && keySlot(keys[i] as string) !== slot))) {
      return undefined;
    }
  }
  // The shape newBatch() makes (a spread of the queue made another, and cost a Redis decision
  // some 20 µs of CPU in the client, measured one call after another).
  return { policy, operation, now, storedReads, requests, keys, replies: queue.replies, work, sent: false };
}

/** Hands `send` the batches of a tick's queue: the queue whole when it can, else regrouped. */
export function coalesce(
  queue: Items,
  cluster: boolean,
  maxBatch: number,
  send: (batch: Batch) => void,
): void {
  const one = whole(queue, cluster, maxBatch);
  if (one === undefined) regroup(queue, cluster, maxBatch, send);
  else send(one);
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
