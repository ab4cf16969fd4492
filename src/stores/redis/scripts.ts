// The Lua scripts as Redis sees them: composed from the .lua files, with SHA1s for EVALSHA, and one
// versioned function library for FCALL.
import { createHash } from 'node:crypto';
import type { ScriptName } from '../../types.js';
import { LUA_SOURCES, type LuaSource } from './lua.generated.js';

/**
 * The scripts: each algorithm's and the combined one (`all`); the same reading what operators stored
 * for identifiers (`<name>:stored`, for limiters with `overrides`); and the two that write a denial
 * and keep the index of stored entries; a global budget's ledgers.
 */
export type ScriptKey =
  | ScriptName
  | 'all'
  | `${ScriptName | 'all'}:stored`
  | 'stored-deny'
  | 'stored-index'
  | LedgerScriptName;

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

/** Each algorithm's Lua function name, as its file defines it. */
const FUNCTIONS: Readonly<Record<ScriptName, string>> = {
  'fixed-window': 'fixed_window',
  'sliding-log': 'sliding_log',
  'sliding-window': 'sliding_window',
  gcra: 'gcra',
  concurrency: 'concurrency',
  'budget-window': 'budget_window',
  'budget-window-grant': 'budget_window_grant',
  'budget-window-release': 'budget_window_release',
  'budget-window-sync': 'budget_window_sync',
  'budget-bucket': 'budget_bucket',
  'budget-bucket-lease': 'budget_bucket_lease',
};
const NAMES = Object.keys(FUNCTIONS) as ScriptName[];

/** The file (src/algorithms/<file>.lua, or src/budget/ for a budget's) of each script whose file is not named after it. */
const FILES: Readonly<Partial<Record<ScriptName, string>>> = {
  'budget-window-grant': 'budget-window',
  'budget-window-release': 'budget-window',
  'budget-window-sync': 'budget-window',
  'budget-bucket-lease': 'budget-bucket',
};
/** The files with a function of their own, each composed once into the combined script. */
const FILE_NAMES = NAMES.filter((name) => FILES[name] === undefined);

/** Scripts that are not decisions: a global budget's ledger (src/budget/ledger-*.lua), with its own body. */
export type LedgerScriptName = 'ledger-windows' | 'ledger-bucket';
const LEDGERS: readonly LedgerScriptName[] = ['ledger-windows', 'ledger-bucket'];

/**
 * The algorithms whose decisions start with a GET: their batch script reads every key with one MGET
 * first (lua/single.lua). The fixed window takes most requests with one INCRBY and reads nothing;
 * the log and the leases read sorted sets.
 */
const READS_AHEAD: Readonly<Record<ScriptName, boolean>> = {
  'fixed-window': false,
  'sliding-log': false,
  'sliding-window': true,
  gcra: true,
  concurrency: false,
  'budget-window': true,
  'budget-window-grant': true,
  'budget-window-release': true,
  'budget-window-sync': true,
  'budget-bucket': true,
  'budget-bucket-lease': true,
};

function source(name: ScriptName): string {
  const file = FILES[name] ?? name;
  return LUA_SOURCES[`${file.startsWith('budget-') ? 'budget' : 'algorithms'}/${file}` as LuaSource];
}

/** One algorithm's batch script; `stored` reads what operators stored for each key (lua/stored.lua). */
function single(name: ScriptName, stored: boolean): string {
  return [
    LUA_SOURCES.prelude,
    source(name),
    ...(stored ? [LUA_SOURCES.stored] : []),
    `local decide = ${FUNCTIONS[name]}`,
    `local read_ahead = ${READS_AHEAD[name]}`,
    `local stored = ${stored}`,
    LUA_SOURCES.single,
  ].join('\n');
}

/** The combined script (lua/all.lua); `stored` as for {@link single}. */
function combined(stored: boolean): string {
  return [
    LUA_SOURCES.prelude,
    ...FILE_NAMES.map(source),
    ...(stored ? [LUA_SOURCES.stored] : []),
    `local stored = ${stored}`,
    LUA_SOURCES.all,
  ].join('\n');
}

const bodies = {
  ...Object.fromEntries(NAMES.map((name) => [name, single(name, false)])),
  all: combined(false),
  ...Object.fromEntries(NAMES.map((name) => [`${name}:stored`, single(name, true)])),
  'all:stored': combined(true),
  'stored-deny': [LUA_SOURCES.prelude, LUA_SOURCES['stored-deny']].join('\n'),
  'stored-index': [LUA_SOURCES.prelude, LUA_SOURCES['stored-index']].join('\n'),
  ...Object.fromEntries(
    LEDGERS.map((name) => [name, [LUA_SOURCES.prelude, LUA_SOURCES[`budget/${name}`]].join('\n')]),
  ),
} as Record<ScriptKey, string>;

/** The library's version: a digest of every body, so two sluice versions never replace each other's. */
export const LIBRARY_VERSION = sha1(Object.values(bodies).join('\n')).slice(0, 12);

/** The library name used with FUNCTION LOAD. */
export const LIBRARY_NAME = `sluice_${LIBRARY_VERSION}`;

export const SCRIPTS: Readonly<Record<ScriptKey, Script>> = Object.fromEntries(
  Object.entries(bodies).map(([name, body]) => [
    name,
    { name, body, sha: sha1(body), functionName: `${LIBRARY_NAME}_${name.replace(/[^a-z0-9]/g, '_')}` },
  ]),
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
