#!/usr/bin/env node
// The `sluice` and `sluice-server` commands: the CLI built into dist/. A file of its own, present before the first
// build, so that `npm ci` in a clone links the commands (npm links no bin whose file is missing).
import '../dist/cli/index.js';
