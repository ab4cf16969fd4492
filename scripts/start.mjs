// `npm start`: builds only when dist/ is older than the sources, then runs `sluice serve` in this process.
import { spawnSync } from 'node:child_process';
import { buildState } from './build-state.mjs';

const state = buildState();
if (!state.current) {
  process.stderr.write(`npm start: building first (${state.why})\n`);
  const build = spawnSync('npm', ['run', 'build', '--silent'], { stdio: 'inherit' });
  if (build.status !== 0) process.exit(build.status ?? 1);
}
// The CLI reads its arguments from process.argv: `npm start -- --port 9000` passes them on.
process.argv = [process.argv[0], 'sluice', 'serve', ...process.argv.slice(2)];
await import('../packages/server/dist/cli/index.js');
