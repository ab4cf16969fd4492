// Writes package.json's entry points (`main`, `module`, `types`, `exports`, `typesVersions`) from the list in
// scripts/subpaths.mjs, so that adding a subpath is one line there. Leaves the file untouched when they agree.
import { readFileSync, writeFileSync } from 'node:fs';
import { entryPoints } from './subpaths.mjs';

const path = new URL('../package.json', import.meta.url);
const before = readFileSync(path, 'utf8');
const after = `${JSON.stringify({ ...JSON.parse(before), ...entryPoints() }, null, 2)}\n`;
if (after !== before) writeFileSync(path, after);
