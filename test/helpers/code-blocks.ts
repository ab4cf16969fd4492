// The TypeScript blocks of the README and docs/*.md, as files a compiler can check, and its errors mapped back to the pages.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One ```ts block of a page. */
export interface CodeBlock {
  /** The page, relative to the repository: `README.md`, `docs/redis.md`. */
  readonly page: string;
  /** The page's line of the block's first line of code (1-based). */
  readonly line: number;
  readonly code: string;
  /** The file the block is compiled as, e.g. `docs_redis_md_L12.ts`. */
  readonly file: string;
}

/** README.md and every page under docs/: the text users read and copy from. */
export function documentedPages(root: string): string[] {
  const docs = readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
  return ['README.md', ...docs];
}

const FENCE = /^(\s*)(`{3,}|~{3,})\s*([\w-]*)/;

/** The ```ts and ```typescript blocks of a page, each a module of its own (copied alone, it must compile). */
export function codeBlocks(page: string, markdown: string): CodeBlock[] {
  const blocks: CodeBlock[] = [];
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string);
    if (open === null) continue;
    const [, , fence = '```', language = ''] = open;
    const body: string[] = [];
    let j = i + 1;
    while (j < lines.length && !(lines[j] as string).trim().startsWith(fence))
      body.push(lines[j++] as string);
    if (language === 'ts' || language === 'typescript') {
      const line = i + 2;
      const file = `${page.replace(/[^\w]/g, '_')}_L${line}.ts`;
      // `export {}` makes a block without imports a module too, so top-level await and names stay its own.
      blocks.push({ page, line, code: `${body.join('\n')}\nexport {};\n`, file });
    }
    i = j;
  }
  return blocks;
}

/** Every block of every documented page. */
export function allCodeBlocks(root: string): CodeBlock[] {
  return documentedPages(root).flatMap((page) => codeBlocks(page, readFileSync(join(root, page), 'utf8')));
}

/**
 * Rewrites tsc's `blocks/docs_redis_md_L12.ts(3,5): error TS2304: ...` as `docs/redis.md:14:5: error
 * TS2304: ...`, the page's own line; other lines are kept as they are.
 */
export function onPages(tscOutput: string, blocks: readonly CodeBlock[]): string[] {
  const byFile = new Map(blocks.map((block) => [block.file, block]));
  return tscOutput
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => {
      const match = /(?:^|\/)([\w]+_L\d+\.ts)\((\d+),(\d+)\): (.*)$/.exec(line);
      const block = match === null ? undefined : byFile.get(match[1] as string);
      if (match === null || block === undefined) return line;
      return `${block.page}:${block.line + Number(match[2]) - 1}:${match[3]}: ${match[4]}`;
    });
}
