// The Lua scripts as Redis sees them: joined from the registry generated from the .lua files, with
// SHA1s for EVALSHA, one versioned function library for FCALL, and Lua error lines mapped to files.
import { createHash } from 'node:crypto';
import { LUA_FILES, LUA_SOURCES, LUA_VERSION, SCRIPT_LAYOUTS, type ScriptKey } from './lua.generated.js';

export type { ScriptKey } from './lua.generated.js';

/** A script as sent to Redis: its body, the SHA1 EVALSHA names it by, and its function name. */
export interface Script {
  readonly name: ScriptKey;
  readonly body: string;
  readonly sha: string;
  readonly functionName: string;
}

function sha1(text: string): string {
  return createHash('sha1').update(text).digest('hex');
}

/** The library's version: a digest of every source, so two sluice versions never replace each other's. */
export const LIBRARY_VERSION = LUA_VERSION;

/** The library name used with FUNCTION LOAD. */
export const LIBRARY_NAME = `sluice_${LIBRARY_VERSION}`;

function partText(part: string): string {
  return (LUA_SOURCES as Readonly<Record<string, string>>)[part] ?? part;
}

export const SCRIPTS: Readonly<Record<ScriptKey, Script>> = Object.fromEntries(
  Object.entries(SCRIPT_LAYOUTS).map(([name, layout]) => {
    const body = layout.map(partText).join('\n');
    const functionName = `${LIBRARY_NAME}_${name.replace(/[^a-z0-9]/g, '_')}`;
    return [name, { name, body, sha: sha1(body), functionName }];
  }),
) as Record<ScriptKey, Script>;

/**
 * The function library: every script body wrapped as a function of (KEYS, ARGV), so the same text
 * runs under EVALSHA and FCALL. Redis 7.0 accepts this header (no flags).
 */
export const LIBRARY_CODE = [
  `#!lua name=${LIBRARY_NAME}`,
  ...Object.values(SCRIPTS).map(
    (script) =>
      `redis.register_function('${script.functionName}', function(KEYS, ARGV)\n${script.body}\nend)`,
  ),
].join('\n');

/**
 * The .lua file and line that line `line` (1-based) of a script's body comes from: the embedded
 * sources keep every line of their file (comments are emptied, not removed), so only the layout's
 * offsets are needed. Undefined for a line of a generated part or past the end.
 */
export function scriptLine(
  name: ScriptKey,
  line: number,
): { readonly file: string; readonly line: number } | undefined {
  let start = 1;
  for (const part of SCRIPT_LAYOUTS[name]) {
    const lines = partText(part).split('\n').length;
    if (line < start + lines) {
      const file = (LUA_FILES as Readonly<Record<string, string>>)[part];
      return file === undefined ? undefined : { file, line: line - start + 1 };
    }
    start += lines;
  }
  return undefined;
}
