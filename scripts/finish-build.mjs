// Marks dist/cjs as CommonJS (the package itself is ESM), so `require('sluice')` loads dist/cjs.
import { chmodSync, cpSync, writeFileSync } from 'node:fs';

writeFileSync(new URL('../dist/cjs/package.json', import.meta.url), '{ "type": "commonjs" }\n');

// The `sluice` bin: executable, as npm makes it on install, so it also runs from a clone.
chmodSync(new URL('../dist/esm/cli/index.js', import.meta.url), 0o755);

// The Envoy service's .proto files, for clients to build from (the service itself carries them
// embedded, see scripts/gen-protos.mjs).
cpSync(new URL('../src/envoy/proto', import.meta.url), new URL('../dist/proto', import.meta.url), {
  recursive: true,
});
