// Where the checkout is, for suites that read its files or run a command from it.
import { fileURLToPath } from 'node:url';

/** The repository root, with a trailing separator (build/test/helpers -> ../../..). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
