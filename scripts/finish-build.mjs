// Marks dist/cjs as CommonJS (the package itself is ESM), so `require('sluice')` loads dist/cjs.
import { chmodSync, writeFileSync } from 'node:fs';

writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n');

// The `sluice` bin: executable, as npm makes it on install, so it also runs from a clone.
chmodSync(new URL('../dist/esm/cli/index.js', import.meta.url), 0o755);
