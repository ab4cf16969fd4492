// The Lua scripts as Redis sees them: bodies with SHA1s for EVALSHA, and one versioned function library.
import { createHash } from 'node:crypto';
import { LUA_SOURCES } from '../../algorithms/lua.generated.js';
import type { ScriptName } from '../../types.js';

/** One script: its body and the SHA1 that EVALSHA names it by, computed once. */
export interface Script {
  readonly name: ScriptName;
  readonly body: string;
  readonly sha: string;
  /** The name it is registered under in the function library. */
  readonly functionName: string;
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

const NAMES = Object.keys(LUA_SOURCES) as ScriptName[];

/** The library's version: a digest of every body, so two sluice versions never replace each other's. */
export const LIBRARY_VERSION = sha1(NAMES.map((n) => LUA_SOURCES[n]).join('\n')).slice(0, 12);

/** The library name used with FUNCTION LOAD. */
export const LIBRARY_NAME = `sluice_${LIBRARY_VERSION}`;

export const SCRIPTS: Readonly<Record<ScriptName, Script>> = Object.fromEntries(
  NAMES.map((name) => {
    const body = LUA_SOURCES[name];
    const script: Script = { name, body, sha: sha1(body), functionName: `${LIBRARY_NAME}_${name.replace(/-/g, '_')}` };
    return [name, script];
  }),
) as Record<ScriptName, Script>;

/**
 * The function library: every script body wrapped as a function of (KEYS, ARGV), so the same text
 * runs under EVALSHA and FCALL. Redis 7.0 accepts this header (no flags).
 */
export const LIBRARY_CODE = [
  `#!lua name=${LIBRARY_NAME}`,
  ...NAMES.map((name) => {
    const script = SCRIPTS[name];
    return `redis.register_function('${script.functionName}', function(KEYS, ARGV)\n${script.body}\nend)`;
  }),
].join('\n');
