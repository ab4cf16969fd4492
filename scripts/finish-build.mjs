// Marks dist/cjs as CommonJS (the package itself is ESM), so `require('sluice')` loads dist/cjs.
import { writeFileSync } from 'node:fs';

writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n');
