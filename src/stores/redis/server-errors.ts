// What a client's error says about a script call, read from each library's wording: whether the
// script ran, and so whether a resend could count twice.
import { ERROR_CODES, SluiceError } from '../../errors.js';

/**
 * Replies that prove the script did not run, so that the store may repair and send it again:
 * `noscript`, the server has no script of that SHA1; `function`, it lost the function library;
 * `readonly`, the node became a replica (a failover) and no write of the script could take place;
 * `moved`, a redirection (MOVED, ASK) the client passed on rather than followed (Valkey GLIDE does
 * with a routed command), so the call never reached the slot's owner.
 */
export type Unrun = 'noscript' | 'function' | 'readonly' | 'moved';

// ioredis Cluster wraps the reply that ends a run of redirections ("Too many Cluster redirections.
// Last error: ReplyError: NOSCRIPT ..."); Valkey GLIDE names the kind ("An error was signalled by
// the server: - NoScriptError: No matching script.").
const WRAPPED = '^(?:Too many Cluster redirections\\. Last error: ReplyError: )?';
const GLIDE = '^An error was signalled by the server: - ';
const NOSCRIPT = new RegExp(`${WRAPPED}NOSCRIPT|${GLIDE}NoScriptError:`);
const TRYAGAIN = new RegExp(`${WRAPPED}TRYAGAIN|${GLIDE}TryAgain:`);
const READONLY = new RegExp(`${WRAPPED}READONLY|${GLIDE}ReadOnly:`);
const REDIRECTED = new RegExp(`${WRAPPED}(?:MOVED|ASK) |${GLIDE}(?:Moved|Ask):`);
const FUNCTION_MISSING = /function not found/i;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : '';
}

/** TRYAGAIN: a slot in migration holds only some of a call's keys; Redis refused before running anything. */
export function isTryAgain(error: unknown): boolean {
  return TRYAGAIN.test(messageOf(error));
}

/**
 * Which reply that proves the script did not run this error is (see {@link Unrun}), for a call
 * made with FCALL (`functions`) or EVALSHA; undefined for any other error, which may have run it.
 */
export function unrunReason(error: unknown, functions: boolean): Unrun | undefined {
  const message = messageOf(error);
  if (functions ? FUNCTION_MISSING.test(message) : NOSCRIPT.test(message)) {
    return functions ? 'function' : 'noscript';
  }
  if (READONLY.test(message)) return 'readonly';
  return REDIRECTED.test(message) ? 'moved' : undefined;
}

/** The store's error for a client's failure, naming the shard (a cluster primary) when known. */
export function redisStoreError(error: unknown, shard?: string): SluiceError {
  if (error instanceof SluiceError) return error;
  // node-redis rejects a timed-out command with an empty message: its name is the news.
  const message = error instanceof Error ? error.message || error.name : String(error);
  const where = shard === undefined ? '' : ` (shard ${shard})`;
  return new SluiceError(ERROR_CODES.STORE, `Redis store failed${where}: ${message}`, { cause: error });
}
