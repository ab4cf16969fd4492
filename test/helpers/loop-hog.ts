// Preloaded into a `sluice serve` child (NODE_OPTIONS=--import) by the overload tests: a deliberately expensive load
// on the process's own event loop, counted rather than timed. SIGUSR2 starts it: slices of SLUICE_HOG_HASHES SHA-256
// digests each, one per turn of the loop (between them the loop reads and answers as usual), until a second SIGUSR2 or
// SLUICE_HOG_SLICES slices. It prints `hog busy` to stderr after the third slice and `hog idle` once it stops.
import { createHash } from 'node:crypto';

const HASHES_PER_SLICE = Number(process.env.SLUICE_HOG_HASHES ?? 40_000);
const MOST_SLICES = Number(process.env.SLUICE_HOG_SLICES ?? 400);
const BUSY_AFTER_SLICES = 3;
const INPUT = Buffer.alloc(1024, 7);

let running = false;
let slices = 0;

function slice(): void {
  if (!running || slices >= MOST_SLICES) {
    running = false;
    process.stderr.write('hog idle\n');
    return;
  }
  for (let hash = 0; hash < HASHES_PER_SLICE; hash++) createHash('sha256').update(INPUT).digest();
  slices += 1;
  if (slices === BUSY_AFTER_SLICES) process.stderr.write('hog busy\n');
  setImmediate(slice);
}

process.on('SIGUSR2', () => {
  running = !running;
  if (running) {
    slices = 0;
    setImmediate(slice);
  }
});
