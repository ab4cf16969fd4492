// `sluice serve --envoy`: the flags of Envoy's rate limit service, and starting it beside the HTTP service.
import type { Registry } from 'prom-client';
import type { MetricsRecorder, Store } from 'sluice';
import type { ServiceGuard } from '../service/guard.js';
import type { Route } from '../service/service.js';
import { optional, parsePositiveInteger, stringFlag, type Values } from './args.js';
import { CliError } from './errors.js';
import type { Connection } from './redis.js';
import type { BudgetPart } from './serve-budget.js';

/** Flags `serve` takes for the Envoy service. */
export const ENVOY_FLAGS = {
  envoy: { type: 'string' },
  'grpc-host': { type: 'string' },
  'grpc-port': { type: 'string' },
  shadow: { type: 'boolean' },
  'quota-mode': { type: 'boolean' },
  'envoy-headers': { type: 'boolean' },
  'envoy-metadata': { type: 'boolean' },
  'envoy-max-message-bytes': { type: 'string' },
  'envoy-max-descriptors': { type: 'string' },
  'envoy-max-entries': { type: 'string' },
} as const;

export const ENVOY_FLAGS_HELP = `  --envoy <path>      also serve Envoy's rate limit service (gRPC ShouldRateLimit, grpc.health.v1,
                      POST /json, GET /healthcheck) with envoyproxy/ratelimit's YAML config: one
                      file, or a directory of .yaml files, reloaded when they change
  --grpc-host <addr>  address of the gRPC server (default 127.0.0.1)
  --grpc-port <n>     port of the gRPC server (default 8081; 0 picks a free one)
  --shadow            answer OK whatever the Envoy limits say (they are still counted)
  --quota-mode        every descriptor in quota mode: a request is over only when all its
                      descriptors are
  --envoy-headers     add the IETF RateLimit and RateLimit-Policy fields (an item per descriptor
                      with a limit) to Envoy's response headers, and a problem body to a refusal
  --envoy-metadata    return the request and the passing descriptors' metadata as Envoy's
                      dynamic metadata
  --envoy-max-message-bytes <n>
                      the largest request taken, gRPC message or POST /json body (default 65536)
  --envoy-max-descriptors <n>
                      the most descriptors in one request (default 64, at most 64)
  --envoy-max-entries <n>
                      the most entries in one descriptor (default 32)
                      A request past a bound is refused (INVALID_ARGUMENT, or 400) and counted.`;

/** What `serve` needs of a started Envoy service. */
export interface EnvoyPart {
  /** Its HTTP twins, POST /json and GET /healthcheck, for the service's route table. */
  readonly routes: readonly Route[];
  /** The banner's line, and the JSON banner's field. */
  readonly banner: string;
  readonly json: Record<string, unknown>;
  close(graceMs: number): Promise<void>;
}

/** How long a health check waits for Redis to answer PING. */
const PROBE_TIMEOUT_MS = 1000;

function answersWithin(reply: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([reply, late]).finally(() => clearTimeout(timer));
}

/** The flags that need `--envoy`. */
const ENVOY_ONLY = Object.keys(ENVOY_FLAGS).filter((flag) => flag !== 'envoy');

type EnvoyModule = typeof import('../envoy/index.js');
type EnvoyOptions = Parameters<EnvoyModule['startEnvoy']>[0];

/** The bounds from their flags, each a positive whole number up to its maximum. */
function boundsOf(envoy: EnvoyModule, values: Values): EnvoyOptions['bounds'] {
  const { DEFAULT_BOUNDS: defaults, BOUND_MAXIMUMS: maximums } = envoy;
  const bound = (flag: string, key: keyof typeof defaults): number =>
    optional(values, flag, (name, text) => parsePositiveInteger(name, text, maximums[key]), defaults[key]);
  return {
    maxMessageBytes: bound('envoy-max-message-bytes', 'maxMessageBytes'),
    maxDescriptors: bound('envoy-max-descriptors', 'maxDescriptors'),
    maxEntries: bound('envoy-max-entries', 'maxEntries'),
  };
}

/** The service's options from the flags. */
function envoyOptions(
  envoy: EnvoyModule,
  values: Values,
  path: string,
  store: Store,
  connection: Connection | undefined,
  log: (line: string) => void,
  registry: Registry | undefined,
  budget: BudgetPart | undefined,
  guard: ServiceGuard | undefined,
  recorder: MetricsRecorder | undefined,
): EnvoyOptions {
  const client = connection?.client;
  return {
    path,
    store,
    budget: budget?.options,
    recorder,
    oneShard: connection?.cluster !== true,
    host: stringFlag(values, 'grpc-host') ?? envoy.GRPC_DEFAULTS.host,
    port: optional(
      values,
      'grpc-port',
      (flag, text) => (text === '0' ? 0 : parsePositiveInteger(flag, text, 65_535)),
      envoy.GRPC_DEFAULTS.port,
    ),
    shadow: values.shadow === true,
    quotaMode: values['quota-mode'] === true,
    headers: values['envoy-headers'] === true,
    metadata: values['envoy-metadata'] === true,
    bounds: boundsOf(envoy, values),
    registry,
    guard,
    probe: client === undefined ? undefined : () => answersWithin(client.ping(), PROBE_TIMEOUT_MS),
    log: (line) => log(`sluice serve: envoy: ${line}`),
  };
}

/** Starts the service; a bad config or a taken port becomes a CliError (exit 2) that says what to do. */
async function startOrExplain(
  envoy: EnvoyModule,
  options: EnvoyOptions,
): Promise<Awaited<ReturnType<EnvoyModule['startEnvoy']>>> {
  try {
    return await envoy.startEnvoy(options);
  } catch (error) {
    if (
      error instanceof Error &&
      (error.name === 'SluiceError' || (error as { code?: string }).code !== undefined)
    ) {
      const code = (error as { code?: string }).code;
      if (code === 'EADDRINUSE' || /address already in use|No address added/i.test(error.message)) {
        throw new CliError(
          `Port ${options.port} on ${options.host} is already in use (--grpc-port chooses another).`,
        );
      }
      throw new CliError(error.message, { cause: error });
    }
    throw error;
  }
}

/**
 * Starts the Envoy service when `--envoy` is given; undefined otherwise. Bad config: a CliError (exit 2).
 * Its metrics join `registry`, the one the service's GET /metrics serves (none without prom-client);
 * the rules that share a budget report to `recorder`, the service's, as its own limiters do.
 */
export async function startEnvoyPart(
  values: Values,
  store: Store,
  connection: Connection | undefined,
  log: (line: string) => void,
  registry: Registry | undefined,
  budget: BudgetPart | undefined,
  guard: ServiceGuard | undefined,
  recorder?: MetricsRecorder,
): Promise<EnvoyPart | undefined> {
  const path = stringFlag(values, 'envoy');
  if (path === undefined) {
    for (const flag of ENVOY_ONLY) {
      if (values[flag] !== undefined)
        throw new CliError(`\`--${flag}\` applies to the Envoy service: give \`--envoy <path>\` too.`);
    }
    return undefined;
  }
  // Loaded only here: `sluice serve` without --envoy, and `import 'sluice'`, never load gRPC or YAML.
  const envoy = await import('../envoy/index.js');
  const options = envoyOptions(
    envoy,
    values,
    path,
    store,
    connection,
    log,
    registry,
    budget,
    guard,
    recorder,
  );
  const running = await startOrExplain(envoy, options);
  const where = `${options.host.includes(':') ? `[${options.host}]` : options.host}:${running.port}`;
  // running.http answers its own two paths: each route hands the request to it.
  const answer: Route['handle'] = (request, response) => {
    running.http(request, response);
  };
  return {
    routes: [
      {
        method: 'POST',
        path: '/json',
        summary: "Envoy's ShouldRateLimit, as JSON",
        handle: answer,
        guarded: true,
      },
      { method: 'GET', path: '/healthcheck', summary: "the Envoy service's health", handle: answer },
    ],
    banner: `  envoy ShouldRateLimit on grpc://${where}, domains ${running.domains.join(', ')} from ${running.files.length} file(s)${registry === undefined ? ' (npm install prom-client for GET /metrics)' : ''}`,
    json: { grpc: where, domains: running.domains, files: running.files },
    close: (graceMs) => running.close(graceMs),
  };
}
