// One call of the combined script (lua/all.lua): its arguments, and each request's result from its reply.
import { ERROR_CODES, SluiceError } from '../../errors.js';
import { OPERATIONS } from '../../operations.js';
import type { StoreRequest, StoreResult } from '../../types.js';
import { SCRIPTS, type Script } from './scripts.js';
import { storedArguments } from './stored-entries.js';

/** What to send: the script (the one reading stored entries when a request asks), and its arguments. */
export interface CombinedCall {
  readonly script: Script;
  /** Slots 0 and 1 are the command and the script's name, which the store fills. */
  readonly args: string[];
  /** Integers per request in the reply. */
  readonly width: number;
}

/** The call deciding `requests` (checked by the caller: one operation, one time, one slot) over `keys`. */
export function combinedCall(requests: readonly StoreRequest[], keys: readonly string[]): CombinedCall {
  const first = requests[0] as StoreRequest;
  // One limiter with `overrides` makes the call read what is stored (each key as its own asks).
  const stored = requests.some((request) => (request.storedReads ?? 0) !== 0);
  const args = ['', '', String(requests.length), ...keys, OPERATIONS[first.operation].code as string];
  args.push(first.now === undefined ? '' : String(first.now));
  for (const request of requests) {
    const [firstParameter, secondParameter] = request.policy.args;
    args.push(request.policy.script, String(request.cost), firstParameter ?? '', secondParameter ?? '');
    if (stored) args.push(...storedArguments(request.storedReads, request.policy));
  }
  return { script: stored ? SCRIPTS['all:stored'] : SCRIPTS.all, args, width: stored ? 5 : 4 };
}

/** Each request's result from the reply, in order, or the error for a reply no script gives. */
export function combinedResults(
  call: CombinedCall,
  answer: unknown,
  count: number,
): StoreResult[] | SluiceError {
  const { width, script } = call;
  if (!Array.isArray(answer) || answer.length !== count * width) {
    return new SluiceError(
      ERROR_CODES.BAD_REPLY,
      `Expected ${count * width} integers from the ${script.name} script, got ${Array.isArray(answer) ? `${answer.length} values` : typeof answer}.`,
    );
  }
  return Array.from({ length: count }, (_, i) => {
    const at = i * width;
    const result: StoreResult = {
      allowed: answer[at] === 1,
      remaining: Number(answer[at + 1]),
      resetMs: Number(answer[at + 2]),
      retryAfterMs: Number(answer[at + 3]),
    };
    const applied = width === 5 ? Number(answer[at + 4]) : 0;
    return applied === 0 ? result : { ...result, stored: applied };
  });
}
