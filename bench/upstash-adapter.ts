// Lets @upstash/ratelimit talk to a plain Redis through ioredis, for the benchmark only.
//
// @upstash/ratelimit (single region, analytics off, no dynamic limits, no deny list) calls two
// methods of its client: `evalsha(sha, keys, args)` and, after a NOSCRIPT, `eval(script, keys, args)`.
// Its 2.x scripts open with `#!lua flags=allow-key-locking`, a flag Redis 7.0 and Valkey 8.0 reject
// ("Unexpected flag in script shebang"). The adapter strips that first line, and maps each of the
// SHA1s the library precomputed (of the text with the line) to the SHA1 of the stripped text the
// server actually holds, so that after the first EVAL every call is one EVALSHA, as it is on Upstash.
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';

const SHEBANG = /^#!lua[^\n]*\n/;

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

/** What @upstash/ratelimit calls on its client; everything else is absent on purpose. */
export interface UpstashLikeClient {
  evalsha(sha: string, keys: string[], args: unknown[]): Promise<unknown>;
  eval(script: string, keys: string[], args: unknown[]): Promise<unknown>;
}

export interface UpstashAdapter extends UpstashLikeClient {
  /** Original SHA1 (as the library computed it) -> SHA1 of the stripped script. */
  readonly shaMap: ReadonlyMap<string, string>;
}

export function upstashAdapter(redis: Redis): UpstashAdapter {
  const shaMap = new Map<string, string>();
  const strings = (values: unknown[]): string[] => values.map(String);
  return {
    shaMap,
    evalsha(sha, keys, args) {
      // An unmapped SHA is sent as is: the server answers NOSCRIPT and the library falls back to eval.
      return redis.evalsha(shaMap.get(sha) ?? sha, keys.length, ...keys, ...strings(args));
    },
    eval(script, keys, args) {
      const stripped = script.replace(SHEBANG, '');
      shaMap.set(sha1(script), sha1(stripped));
      return redis.eval(stripped, keys.length, ...keys, ...strings(args));
    },
  };
}
