// Generates the script registry (src/stores/redis/lua.generated.ts) from every .lua file under src/,
// each of which says on its first line what it is, so both builds (ESM, CJS) and bundlers carry the
// scripts without reading files at run time. The .lua files stay the source; moving one to another
// folder under src/ needs no change here.
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const src = join(root, 'src');

/**
 * What a file's first line may say it is (`--! <kind> [option ...]`):
 * - `prelude`: the head of every script (fast locals, the clock).
 * - `algorithm [reads-ahead] [also=<name>,...]`: defines the function named after the file (`-`
 *   becomes `_`) and, with `also`, more decision functions named likewise. Each is one decision
 *   script of the same name; `reads-ahead` when its decisions start with a GET (the batch then reads
 *   every key with one MGET first). The file's own function is also one branch of the combined script.
 * - `decision-helpers`: composed into every decision script after the algorithms (stored entries).
 * - `decision-body`: the body of each decision script, after `local decide, read_ahead = <fn>, <bool>`.
 * - `combined-body`: the body of the combined script (`all`), after every algorithm.
 * - `script`: a script of its own, named after the file, composed after the prelude.
 */
const KINDS = ['prelude', 'algorithm', 'decision-helpers', 'decision-body', 'combined-body', 'script'];
const HEADER = /^--! ([a-z-]+)((?: [a-z-]+(?:=[a-z0-9,-]+)?)*)$/;

function luaFiles(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return luaFiles(path);
      return entry.name.endsWith('.lua') ? [path] : [];
    })
    .sort();
}

function fail(path, message) {
  throw new Error(`${relative(root, path)}: ${message}`);
}

/**
 * The text as embedded: every comment and every leading and trailing space removed (Lua reads no
 * indentation, and a string never spans lines here: long brackets are refused), and each removed comment line
 * left empty rather than dropped, so that line n of the embedded text is line n of the file (a Lua
 * error names a line of the script; scriptLine() in scripts.ts maps it to its file). Long brackets
 * (`--[[`, `[[`) are refused: this scanner does not read them.
 */
function strip(path, text) {
  return text
    .split('\n')
    .map((line, i) => {
      let quote;
      for (let at = 0; at < line.length; at++) {
        const c = line[at];
        if (quote !== undefined) {
          if (c === '\\') at++;
          else if (c === quote) quote = undefined;
        } else if (c === "'" || c === '"') {
          quote = c;
        } else if (c === '[' && (line[at + 1] === '[' || line[at + 1] === '=')) {
          fail(path, `line ${i + 1}: long brackets are not supported by the generator`);
        } else if (c === '-' && line[at + 1] === '-') {
          return line.slice(0, at).trim();
        }
      }
      return line.trim();
    })
    .join('\n')
    .replace(/\n+$/, '');
}

const sources = {};
const files = {};
const roles = {
  prelude: [],
  algorithm: [],
  'decision-helpers': [],
  'decision-body': [],
  'combined-body': [],
  script: [],
};
for (const path of luaFiles(src)) {
  const text = readFileSync(path, 'utf8');
  const name = path.slice(path.lastIndexOf('/') + 1, -'.lua'.length);
  const header = HEADER.exec(text.slice(0, text.indexOf('\n')));
  if (header === null || !KINDS.includes(header[1])) {
    fail(path, `the first line must say what the file is: \`--! <${KINDS.join('|')}> [option ...]\``);
  }
  if (sources[name] !== undefined) fail(path, `another .lua file is named ${name}: ${files[name]}`);
  const options = Object.fromEntries(
    header[2]
      .split(' ')
      .filter(Boolean)
      .map((option) => option.split('=')),
  );
  for (const option of Object.keys(options)) {
    if (header[1] !== 'algorithm' || !['reads-ahead', 'also'].includes(option)) {
      fail(path, `\`${option}\` is not an option of a file that is a ${header[1]}`);
    }
  }
  sources[name] = strip(path, text);
  files[name] = relative(root, path);
  roles[header[1]].push({ name, options, path });
}
for (const kind of ['prelude', 'decision-helpers', 'decision-body', 'combined-body']) {
  if (roles[kind].length !== 1) {
    throw new Error(`Expected one .lua file that is a ${kind}, found ${roles[kind].length}.`);
  }
}
const [prelude, helpers, decision, combined] = [
  'prelude',
  'decision-helpers',
  'decision-body',
  'combined-body',
].map((kind) => roles[kind][0].name);
const luaName = (name) => name.replace(/-/g, '_');

/** Each script as the parts it is made of, in order: a source's name, or one line of code. */
const layouts = {};
/** Each decision function, by its dashed name, and the script that holds it. */
const decisions = {};
for (const { name, options } of roles.algorithm) {
  const also = (options.also ?? '').split(',').filter(Boolean);
  // One script per file: a call of one of its other functions ends with that function's name.
  const others =
    also.length === 0
      ? 'nil'
      : `{ ${also.map((one) => `[${JSON.stringify(one)}] = ${luaName(one)}`).join(', ')} }`;
  const bind = `local decide, read_ahead, functions = ${luaName(name)}, ${'reads-ahead' in options}, ${others}`;
  layouts[name] = [prelude, name, helpers, bind, decision];
  for (const one of [name, ...also]) decisions[one] = name;
}
// The combined script's dispatch table: each algorithm file's own function, by the file's name.
const table = roles.algorithm.map(({ name }) => `[${JSON.stringify(name)}] = ${luaName(name)}`).join(', ');
layouts.all = [
  prelude,
  ...roles.algorithm.map(({ name }) => name),
  helpers,
  `local ALGORITHMS = { ${table} }`,
  combined,
];
for (const { name } of roles.script) layouts[name] = [prelude, name];
for (const [name, layout] of Object.entries(layouts)) {
  const body = layout.map((part) => sources[part] ?? part).join('\n');
  // The same limits the server has: the combined script is the largest chunk.
  if (body.length > 512 * 1024) throw new Error(`The ${name} script is ${body.length} bytes.`);
}

// A digest of every layout and source: the function library's version, so two sluice versions
// loaded on one server never replace each other's library.
const version = createHash('sha1')
  .update(JSON.stringify([sources, layouts, decisions]))
  .digest('hex')
  .slice(0, 12);

const lines = (entries, format) =>
  entries.map(([key, value]) => `  ${JSON.stringify(key)}: ${format(value)},`).join('\n');
// Typed by name, not `as const`: the declarations would otherwise carry every script's text again.
const text = `// Generated by \`npm run gen\` (node scripts/gen-scripts.mjs) from the .lua files under src/: edit those, not this.

/** The .lua files, by name (the file's name without \`.lua\`). */
export type LuaSource =
${Object.keys(sources)
  .map((name) => `  | ${JSON.stringify(name)}`)
  .join('\n')};

/** The scripts sluice loads: one per decision function, the combined one (\`all\`), and the scripts of their own. */
export type ScriptKey =
${Object.keys(layouts)
  .map((name) => `  | ${JSON.stringify(name)}`)
  .join('\n')};

/** The decision functions, by name: each algorithm file's own, and those its first line adds with \`also\`. */
export type DecisionName =
${Object.keys(decisions)
  .map((name) => `  | ${JSON.stringify(name)}`)
  .join('\n')};

/** The script that holds each decision function (a call of a function that is not its script's own names it last). */
export const DECISION_SCRIPTS: Readonly<Record<DecisionName, ScriptKey>> = {
${lines(Object.entries(decisions), JSON.stringify)}
};

/** A digest of every source and layout below. */
export const LUA_VERSION = ${JSON.stringify(version)};

/**
 * Each .lua file as embedded: comments removed, each comment line left empty so that line numbers
 * stay the file's.
 */
export const LUA_SOURCES: Readonly<Record<LuaSource, string>> = {
${lines(Object.entries(sources), JSON.stringify)}
};

/** Where each .lua file is, from the repository's root. */
export const LUA_FILES: Readonly<Record<LuaSource, string>> = {
${lines(Object.entries(files), JSON.stringify)}
};

/** Each script as the parts it is joined from with newlines: a source, or one line of code. */
export const SCRIPT_LAYOUTS: Readonly<Record<ScriptKey, readonly (LuaSource | \`local \${string}\`)[]>> = {
${lines(Object.entries(layouts), (layout) => JSON.stringify(layout))}
};
`;
const target = join(src, 'stores', 'redis', 'lua.generated.ts');
let previous = '';
try {
  previous = readFileSync(target, 'utf8');
} catch {}
if (previous !== text) writeFileSync(target, text);

// The Envoy service's messages, embedded the same way.
await import('./gen-protos.mjs');

// The dashboard's page, embedded the same way.
await import('./gen-dashboard.mjs');

// package.json's entry points, from the list of subpaths.
await import('./gen-exports.mjs');

// build/package.json: in the test build, the server's `sluice` is the library built beside it.
await import('./gen-build-package.mjs');
