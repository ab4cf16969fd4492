// Which compiled test files start a server of the run's family (Redis or Valkey): those that import,
// directly or through other test modules, test/helpers/server-family.js, the one place that chooses it.
import { readFileSync } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';

const FAMILY = `${sep}helpers${sep}server-family.js`;
// Relative specifiers of static imports, re-exports and dynamic imports, as tsc emits them.
const IMPORT = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)['"](\.{1,2}\/[^'"]+\.js)['"]/g;

/**
 * A function telling whether a compiled test file (under `root`, e.g. build/test) reaches the
 * server-family helper; modules outside `root` (the library under build/src) start no test server.
 */
export function serverReach(root) {
  const top = resolve(root) + sep;
  const texts = new Map();
  // Only "reaches" is remembered: a "does not" found inside an import cycle may be partial.
  const reaching = new Set();
  const textOf = (file) => {
    if (!texts.has(file)) {
      let text = '';
      try {
        text = readFileSync(file, 'utf8');
      } catch {}
      texts.set(file, text);
    }
    return texts.get(file);
  };
  const reaches = (file, visiting) => {
    if (reaching.has(file) || file.endsWith(FAMILY)) return true;
    if (!file.startsWith(top) || visiting.has(file)) return false;
    visiting.add(file);
    for (const match of textOf(file).matchAll(IMPORT)) {
      if (reaches(resolve(dirname(file), match[1]), visiting)) {
        reaching.add(file);
        return true;
      }
    }
    return false;
  };
  return (file) => reaches(resolve(file), new Set());
}
