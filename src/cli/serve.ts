// `sluice serve`: placeholder until the service lands.
import { COMMON_FLAGS } from './args.js';
import type { Command } from './command.js';
import { EXIT } from './errors.js';

export const serve: Command = {
  name: 'serve',
  summary: 'an HTTP rate-limit service: POST /v1/limit, on the memory store or Redis',
  flags: { ...COMMON_FLAGS },
  help: 'Usage: sluice serve',
  run: async () => EXIT.ERROR,
};
