// Empties what a build writes (the library's dist/, the server package's dist/, docs/ and LICENSE) before a build,
// so a file whose source was renamed or removed is never packed.
import { rmSync } from 'node:fs';

for (const path of [
  '../dist',
  '../packages/server/dist',
  '../packages/server/docs',
  '../packages/server/LICENSE',
]) {
  rmSync(new URL(path, import.meta.url), { recursive: true, force: true });
}
