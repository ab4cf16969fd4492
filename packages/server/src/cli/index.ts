#!/usr/bin/env node
// The `sluice` command: picks the subcommand, parses its arguments, runs it, and maps failures to exit codes.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseCommand } from './args.js';
import { audit } from './audit.js';
import { bench } from './bench.js';
import type { Command, Context } from './command.js';
import { deny } from './deny.js';
import { CliError, EXIT, errorText } from './errors.js';
import { inspect } from './inspect.js';
import { limits } from './limits.js';
import { reset } from './reset.js';
import { serve } from './serve.js';
import { closest } from './suggest.js';
import { verify } from './verify.js';
import { runVerifyWorker, VERIFY_WORKER } from './verify-worker.js';

const COMMANDS: readonly Command[] = [audit, verify, inspect, reset, limits, deny, bench, serve];

const USAGE = `Usage: sluice <command> [options]

Operator's tools for sluice rate limiters on Redis, Valkey and Redis Cluster, and a rate-limit service.

Commands:
${COMMANDS.map((command) => `  ${command.name.padEnd(9)} ${command.summary}`).join('\n')}

Run \`sluice <command> --help\` for a command's options. Every command takes --json for machine
output and --verbose for stacks. Exit codes: 0 fine, 1 something found, 2 could not run, 130 interrupted.
\`sluice --version\` prints the version.`;

function write(stream: NodeJS.WriteStream, text: string): void {
  stream.write(text.endsWith('\n') ? text : `${text}\n`);
}

/**
 * The package's version, from the package.json above the entry point (bin/ in sluice-server; in the
 * tests, build/package.json above build/packages/server/src/cli/). Found from the entry point, which
 * both module formats know.
 */
function version(): string {
  let dir = dirname(realpathSync(process.argv[1] ?? '.'));
  for (let depth = 0; depth < 5; depth++, dir = dirname(dir)) {
    const path = join(dir, 'package.json');
    if (!existsSync(path)) continue;
    const { name, version } = JSON.parse(readFileSync(path, 'utf8')) as { name?: string; version?: string };
    if ((name === 'sluice' || name === 'sluice-server') && version !== undefined) return version;
  }
  throw new CliError('Cannot find the package.json of sluice beside its command.');
}

function findCommand(name: string): Command {
  const command = COMMANDS.find((candidate) => candidate.name === name);
  if (command !== undefined) return command;
  const names = COMMANDS.map((c) => c.name);
  const guess = closest(name, names);
  const list = `${guess === undefined ? '; expected one of' : `: did you mean ${guess}? The commands are`} ${names.join(', ')}`;
  throw new CliError(`Unknown command ${JSON.stringify(name)}${list} (see \`sluice --help\`).`);
}

async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === VERIFY_WORKER) return runVerifyWorker();
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    write(process.stdout, USAGE);
    return name === undefined ? EXIT.ERROR : EXIT.OK;
  }
  if (name === '--version' || name === '-v' || name === 'version') {
    write(process.stdout, version());
    return EXIT.OK;
  }
  const command = findCommand(name);
  const { values, positionals } = parseCommand(command, rest);
  if (values.help === true) {
    write(process.stdout, command.help);
    return EXIT.OK;
  }
  const controller = new AbortController();
  const interrupt = (): void => {
    if (controller.signal.aborted) {
      // A second Ctrl-C: the operator does not want to wait for the cleanup.
      process.exit(EXIT.INTERRUPTED);
    }
    process.stderr.write(`\nsluice ${name}: interrupted, cleaning up (Ctrl-C again to quit at once)\n`);
    controller.abort();
  };
  process.on('SIGINT', interrupt);
  const context: Context = {
    values,
    positionals,
    signal: controller.signal,
    json: values.json === true,
    out: (text) => write(process.stdout, text),
    err: (text) => write(process.stderr, text),
  };
  try {
    const code = await command.run(context);
    return controller.signal.aborted ? EXIT.INTERRUPTED : code;
  } finally {
    process.off('SIGINT', interrupt);
  }
}

const argv = process.argv.slice(2);
main(argv).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    const verbose = argv.includes('--verbose');
    const known = COMMANDS.some((command) => command.name === argv[0]);
    const label = known ? `sluice ${argv[0]}` : 'sluice';
    if (error instanceof CliError) {
      write(process.stderr, `${label}: ${error.message}`);
      if (verbose && error.cause instanceof Error)
        write(process.stderr, error.cause.stack ?? String(error.cause));
    } else {
      write(process.stderr, `${label}: ${errorText(error)}${verbose ? '' : ' (--verbose shows the stack)'}`);
      if (verbose && error instanceof Error) write(process.stderr, error.stack ?? String(error));
    }
    process.exitCode = EXIT.ERROR;
  },
);
