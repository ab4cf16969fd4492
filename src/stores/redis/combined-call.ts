// One call of the combined script (lua/all.lua): its arguments, and each request's result from its reply.

import { withFields } from '../../copy.js';
import { ERROR_CODES, SluiceError } from '../../errors.js';
import { OPERATIONS, shapeOf } from '../../operations.js';
import type { StoreRequest, StoreResult } from '../../types.js';
import { SCRIPTS, type Script } from './scripts.js';
import { storedArguments } from './stored-entries.js';
import { wireOf } from './wire.js';

/** What to send: the script, and its arguments (the last says whether stored entries are read). */
export interface CombinedCall {
  readonly script: Script;
  /** Slots 0 and 1 are the command and the script's name, which the store fills. */
  readonly args: string[];
  /** Whether each record carries the stored limit applied, after its four values. */
  readonly stored: boolean;
}

/** The call deciding `requests` (checked by the caller: one operation, one time, one slot) over `keys`. */
export function combinedCall(requests: readonly StoreRequest[], keys: readonly string[]): CombinedCall {
  const first = requests[0] as StoreRequest;
  // One limiter with `overrides` makes the call read what is stored (each key as its own asks).
  const stored = requests.some((request) => (request.storedReads ?? 0) !== 0);
  // Every key carries as many operands as the one that takes most (a lease's id), padded with ''.
  const operands = Math.max(...requests.map((request) => shapeOf(request).operands));
  const args = ['', '', String(requests.length), ...keys, OPERATIONS[first.operation].code as string];
  args.push(first.now === undefined ? '' : String(first.now), String(operands));
  for (const request of requests) {
    const wire = wireOf(request.policy);
    const [firstParameter, secondParameter] = wire.args;
    args.push(wire.name, String(request.cost), firstParameter ?? '', secondParameter ?? '');
    for (let k = 0; k < operands; k++) args.push(request.operands?.[k] ?? '');
    if (stored) args.push(...storedArguments(request.storedReads, wire));
  }
  args.push(stored ? '1' : '0');
  return { script: SCRIPTS.all, args, stored };
}

/**
 * Each request's result from the reply, in order: per key, allowed, remaining, resetMs,
 * retryAfterMs, the stored limit applied (when `stored`), the number of fields and the fields. Or
 * the error for a reply no script gives.
 */
export function combinedResults(
  call: CombinedCall,
  answer: unknown,
  count: number,
): StoreResult[] | SluiceError {
  const results = Array.isArray(answer) ? parse(answer as unknown[], count, call.stored) : undefined;
  if (results !== undefined) return results;
  return new SluiceError(
    ERROR_CODES.BAD_REPLY,
    `Expected ${count} records from the ${call.script.name} script, got ${Array.isArray(answer) ? `${answer.length} values that do not make them` : typeof answer}.`,
  );
}

function parse(values: readonly unknown[], count: number, stored: boolean): StoreResult[] | undefined {
  const results: StoreResult[] = [];
  const head = stored ? 5 : 4;
  let at = 0;
  for (let i = 0; i < count; i++) {
    const fields = values[at + head];
    if (typeof fields !== 'number' || !Number.isSafeInteger(fields) || fields < 0) return undefined;
    for (let k = 0; k <= head + fields; k++) if (typeof values[at + k] !== 'number') return undefined;
    let result: StoreResult = {
      allowed: values[at] === 1,
      remaining: values[at + 1] as number,
      resetMs: values[at + 2] as number,
      retryAfterMs: values[at + 3] as number,
    };
    const applied = stored ? (values[at + 4] as number) : 0;
    if (applied !== 0) result = withFields(result, { stored: applied });
    if (fields > 0)
      result = withFields(result, {
        fields: values.slice(at + head + 1, at + head + 1 + fields) as number[],
      });
    results.push(result);
    at += head + 1 + fields;
  }
  return at === values.length ? results : undefined;
}
