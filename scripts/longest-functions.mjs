// Lists the longest functions of src/ (functions, methods, accessors, constructors and arrow
// functions with a block body), by lines from the head to the closing brace, longest first:
//   node scripts/longest-functions.mjs [count] [folder]
// A small lexer blanks comments and strings, then braces are matched; no TypeScript API needed.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const ROOT = new URL('..', import.meta.url).pathname;
const count = Number(process.argv[2] ?? 10);
const folder = process.argv[3] ?? 'src';

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return files(path);
    return name.endsWith('.ts') && !name.endsWith('.generated.ts') && !name.endsWith('.d.ts') ? [path] : [];
  });
}

/** The source with comments and the text of strings and templates blanked (newlines kept). */
function codeOnly(text) {
  const out = [...text];
  const blank = (from, to) => {
    for (let k = from; k < to; k++) if (out[k] !== '\n') out[k] = ' ';
  };
  const templates = []; // brace depth at which each open template's `${` was entered
  let depth = 0;
  let i = 0;
  const inTemplate = () => {
    const start = i;
    while (i < text.length && text[i] !== '`') {
      if (text[i] === '\\') i += 2;
      else if (text[i] === '$' && text[i + 1] === '{') {
        blank(start, i);
        templates.push(depth);
        depth++;
        i += 2;
        return;
      } else i++;
    }
    blank(start, i);
    i++;
  };
  while (i < text.length) {
    const c = text[i];
    const next = text[i + 1];
    if (c === '/' && next === '/') {
      const end = text.indexOf('\n', i);
      blank(i, end === -1 ? text.length : end);
      i = end === -1 ? text.length : end;
    } else if (c === '/' && next === '*') {
      const end = text.indexOf('*/', i + 2) + 2;
      blank(i, end);
      i = end;
    } else if (c === "'" || c === '"') {
      const start = ++i;
      while (i < text.length && text[i] !== c) i += text[i] === '\\' ? 2 : 1;
      blank(start, i);
      i++;
    } else if (c === '`') {
      i++;
      inTemplate();
    } else if (c === '{') {
      depth++;
      i++;
    } else if (c === '}') {
      depth--;
      i++;
      if (templates.length > 0 && templates[templates.length - 1] === depth) {
        templates.pop();
        inTemplate();
      }
    } else i++;
  }
  return out.join('');
}

const KEYWORDS = /^(if|for|while|switch|catch|with|return|else|do|try|finally)$/;

/** Whether the code before a `{` (back to the previous statement boundary) heads a function body. */
function functionHead(before) {
  const head = before.slice(
    Math.max(before.lastIndexOf(';'), before.lastIndexOf('{'), before.lastIndexOf('}')) + 1,
  );
  if (/=>\s*$/.test(head)) return 'arrow';
  const fn = /\bfunction\b\s*\*?\s*([\w$]*)/.exec(head);
  if (fn !== null && /\)\s*(:[^=]*)?$/.test(head)) return fn[1] || 'function';
  const method =
    /^\s*(?:(?:public|private|protected|static|async|readonly|override|get|set)\s+)*(#?[\w$]+)\s*(?:<[^(]*>)?\s*\(/.exec(
      head,
    );
  if (method !== null && !KEYWORDS.test(method[1]) && /\)\s*(:[^=]*)?$/.test(head)) return method[1];
  return undefined;
}

const found = [];
for (const path of files(join(ROOT, folder))) {
  const code = codeOnly(readFileSync(path, 'utf8'));
  const stack = [];
  let line = 1;
  for (let i = 0; i < code.length; i++) {
    const c = code[i];
    if (c === '\n') line++;
    else if (c === '{') {
      const name = functionHead(code.slice(Math.max(0, i - 2000), i));
      // Arrow functions take the name they are assigned to, when they are.
      const assigned =
        /(#?[\w$]+)\s*(?::[^=;{}]*)?=\s*(?:async\s*)?(?:\([^;{}]*\)|[\w$]+)\s*(?::[^=;{}]*)?=>\s*$/.exec(
          code.slice(Math.max(0, i - 400), i),
        );
      const label = name === 'arrow' ? (assigned?.[1] ?? '(arrow)') : name;
      const headLine =
        label === undefined
          ? line
          : line - (code.slice(Math.max(0, i - 2000), i).match(/\n/g)?.length ?? 0) + headOffset(code, i);
      stack.push({ label, line: headLine });
    } else if (c === '}') {
      const open = stack.pop();
      if (open?.label !== undefined) {
        found.push({
          lines: line - open.line + 1,
          name: open.label,
          at: `${relative(ROOT, path)}:${open.line}`,
        });
      }
    }
  }
}

/** Lines from 2000 characters back to the line where the function's head starts. */
function headOffset(code, at) {
  const window = code.slice(Math.max(0, at - 2000), at);
  const boundary = Math.max(window.lastIndexOf(';'), window.lastIndexOf('{'), window.lastIndexOf('}')) + 1;
  const head = window.slice(boundary);
  const firstCode = head.search(/\S/);
  return window.slice(0, boundary + Math.max(firstCode, 0)).match(/\n/g)?.length ?? 0;
}

found.sort((a, b) => b.lines - a.lines);
for (const { lines, name, at } of found.slice(0, count))
  console.log(`${String(lines).padStart(4)}  ${name}  ${at}`);
