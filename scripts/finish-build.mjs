// Marks dist/cjs as CommonJS (the package itself is ESM), so `require('sluice')` loads dist/cjs; completes the
// server package (packages/server: the `sluice` command and the service) with what it ships beside its build.
import { cpSync, readdirSync, writeFileSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const server = new URL('packages/server/', root);

writeFileSync(new URL('dist/cjs/package.json', root), '{ "type": "commonjs" }\n');

// The Envoy service's .proto files, for clients to build from (the service itself carries them
// embedded, see scripts/gen-protos.mjs).
cpSync(new URL('src/envoy/proto', server), new URL('dist/proto', server), { recursive: true });

// The docs pages (not their images) and the license, which a package ships from its own folder. Error messages
// point to docs/errors.md; the service's pages link to the others.
for (const page of readdirSync(new URL('docs', root)).filter((name) => name.endsWith('.md'))) {
  cpSync(new URL(`docs/${page}`, root), new URL(`docs/${page}`, server));
}
cpSync(new URL('LICENSE', root), new URL('LICENSE', server));
