// Lists the names that src/**/*.ts and packages/server/src/**/*.ts declare with `export` and prints every one declared
// in more than one file: one name, one meaning (docs/contributing.md, Glossary), across the library and the server that
// is built on it. Re-exports (`export { X } from './x'`, `export * from`) are not declarations; `export { local as name }`
// without `from` is. Exits 1 when a name other than ADAPTER_NAMES is declared twice. TypeScript 7 has no JavaScript
// compiler API, so this reads the source itself: comments, strings, template and regular expression literals are
// blanked first, then only statements at brace depth 0 count, and an `export` it cannot read is an error rather than a
// guess. `--json` prints { duplicates }.
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = new URL('../', import.meta.url).pathname;
/** The folders read: the library's and the server package's sources. */
export const SOURCE_DIRS = Object.freeze([join(ROOT, 'src'), join(ROOT, 'packages', 'server', 'src')]);

/**
 * The names every framework's subpath exports for its own middleware (sluice/express, sluice/koa, …): one meaning,
 * declared once per framework under src/http/adapters/, and public, so they stay.
 */
export const ADAPTER_NAMES = Object.freeze(['rateLimit', 'shed']);

function sourceFiles(dir) {
  const files = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...sourceFiles(path));
    else if (entry.name.endsWith('.ts')) files.push(path);
  }
  return files;
}

/** The source with comments, string and template literals blanked (newlines kept), and braces inside `${}` kept. */
function code(text) {
  let out = '';
  let i = 0;
  const templates = []; // brace depth at each open `${` of a template literal
  let depth = 0;
  const blank = (s) => s.replace(/[^\n]/g, ' ');
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      const stop = end === -1 ? text.length : end;
      out += blank(text.slice(i, stop));
      i = stop;
    } else if (c === '/' && next === '*') {
      const stop = text.indexOf('*/', i + 2) + 2;
      out += blank(text.slice(i, stop));
      i = stop;
    } else if (
      c === '/' &&
      /(?:^|[(,=:[!&|?{};+\-*%<>~^]|\breturn|\btypeof|\bcase)\s*$/.test(out.slice(-40))
    ) {
      // a regular expression literal: it ends at the first unescaped `/` outside a character class
      let j = i + 1;
      let inClass = false;
      while (j < text.length && (text[j] !== '/' || inClass)) {
        if (text[j] === '[') inClass = true;
        else if (text[j] === ']') inClass = false;
        j += text[j] === '\\' ? 2 : 1;
      }
      out += blank(text.slice(i, j + 1));
      i = j + 1;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < text.length && text[j] !== c) j += text[j] === '\\' ? 2 : 1;
      out += blank(text.slice(i, j + 1));
      i = j + 1;
    } else if (c === '`' || (c === '}' && templates.length > 0 && templates.at(-1) === depth)) {
      // a template literal, or its rest after a `${ … }`
      if (c === '}') templates.pop();
      let j = i + 1;
      while (j < text.length && text[j] !== '`' && !(text[j] === '$' && text[j + 1] === '{'))
        j += text[j] === '\\' ? 2 : 1;
      if (text[j] === '`') {
        out += blank(text.slice(i, j + 1));
        i = j + 1;
      } else {
        out += blank(text.slice(i, j + 2));
        templates.push(depth);
        i = j + 2;
      }
    } else {
      if (c === '{') depth++;
      else if (c === '}') depth--;
      out += c;
      i++;
    }
  }
  return out;
}

const DECLARATION =
  /^export\s+(?:declare\s+)?(?:default\s+)?(?:abstract\s+|async\s+)*(function\s*\*?|class|interface|type|enum|const\s+enum|const|let|var|namespace|module)\s+([A-Za-z_$][\w$]*|[{[])/;
const LOCAL =
  /^(?:declare\s+)?(?:abstract\s+|async\s+)*(?:function\s*\*?|class|interface|type|enum|const\s+enum|const|let|var|namespace)\s+([A-Za-z_$][\w$]*)/;

/** The names one file declares with `export`. */
export function declaredExports(path) {
  const text = code(readFileSync(path, 'utf8'));
  const names = [];
  const locals = new Set();
  const lists = [];
  let depth = 0;
  let start = true; // at the start of a statement at depth 0
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{') depth++;
    else if (c === '}') depth--;
    if (depth !== 0 || !start || /\s/.test(c)) {
      if (depth === 0 && (c === ';' || c === '}' || c === '\n')) start = true;
      else if (!/\s/.test(c)) start = false;
      continue;
    }
    start = false;
    const rest = text.slice(i, i + 400);
    if (rest.startsWith('export')) {
      if (/^export\s+(?:type\s+)?\{/.test(rest) || /^export\s*\{/.test(rest)) {
        const close = text.indexOf('}', i);
        const after = text.slice(close + 1, close + 40);
        if (!/^\s*from\b/.test(after)) lists.push(text.slice(text.indexOf('{', i) + 1, close));
        continue;
      }
      if (
        /^export\s+(?:type\s+)?\*/.test(rest) ||
        /^export\s+default\s+(?!function|class|abstract)/.test(rest)
      )
        continue;
      if (/^export\s+import\b/.test(rest) || /^export\s*=/.test(rest)) continue;
      const match = DECLARATION.exec(rest);
      if (!match)
        throw new Error(`${relative(ROOT, path)}: an export this script cannot read: ${rest.split('\n')[0]}`);
      if (match[2] === '{' || match[2] === '[') {
        throw new Error(
          `${relative(ROOT, path)}: a destructuring export this script does not read: ${rest.split('\n')[0]}`,
        );
      }
      if (!/^export\s+(?:declare\s+)?default\b/.test(rest)) names.push(match[2]);
    } else {
      const match = LOCAL.exec(rest);
      if (match) locals.add(match[1]);
    }
  }
  for (const list of lists) {
    for (const element of list.split(',')) {
      const parts = element
        .trim()
        .replace(/^type\s+/, '')
        .split(/\s+as\s+/);
      if (parts[0] && locals.has(parts[0])) names.push((parts[1] ?? parts[0]).trim());
    }
  }
  return [...new Set(names)];
}

/**
 * name -> the files under `dirs` (one folder or several) that declare it, for every name declared in more than one.
 * Paths are relative to `root`: the repository's root for the default folders, the folder's parent for one folder.
 */
export function duplicateExports(
  dirs = SOURCE_DIRS,
  root = typeof dirs === 'string' ? join(dirs, '..') : ROOT,
) {
  const list = typeof dirs === 'string' ? [dirs] : dirs;
  const where = new Map();
  for (const path of list.flatMap((dir) => sourceFiles(dir))) {
    for (const name of declaredExports(path)) {
      const files = where.get(name) ?? [];
      files.push(relative(root, path));
      where.set(name, files);
    }
  }
  const duplicates = {};
  for (const [name, files] of [...where].sort(([a], [b]) => a.localeCompare(b))) {
    if (files.length > 1) duplicates[name] = files.sort();
  }
  return duplicates;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const duplicates = duplicateExports();
  if (process.argv.includes('--json')) console.log(JSON.stringify({ duplicates }, null, 2));
  else {
    for (const [name, files] of Object.entries(duplicates)) {
      const note = ADAPTER_NAMES.includes(name) ? ' (one per framework adapter: allowed)' : '';
      console.log(`${name}: ${files.join(', ')}${note}`);
    }
  }
  process.exitCode = Object.keys(duplicates).some((name) => !ADAPTER_NAMES.includes(name)) ? 1 : 0;
}
