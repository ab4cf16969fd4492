// `sluice serve`: the rate-limit service on the memory store (or Redis), until SIGTERM or Ctrl-C.
import { createServer, type Server } from 'node:http';
import {
  createLimiter,
  type Limiter,
  type LimiterOptions,
  MemoryStore,
  type MetricsRecorder,
  RedisStore,
  SluiceError,
  type Store,
} from 'sluice';
import { checkAdminToken } from '../dashboard/access.js';
import { type Monitor, startMonitor } from '../dashboard/monitor.js';
import { adminRouteList } from '../dashboard/routes.js';
import { type GuardSettings, ServiceGuard } from '../service/guard.js';
import { RequestLog } from '../service/request-log.js';
import { createService, type Route } from '../service/service.js';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONFIG_FLAGS,
  CONFIG_FLAGS_HELP,
  optional,
  parseDuration,
  parsePositiveInteger,
  stringFlag,
  type Values,
} from './args.js';
import type { Command, Context } from './command.js';
import { type Config, loadConfig } from './config.js';
import { CliError, EXIT, errorText } from './errors.js';
import { type Connection, connect, DEFAULT_URL } from './redis.js';
import { banner } from './serve-banner.js';
import { BUDGET_FLAGS, BUDGET_FLAGS_HELP, type BudgetPart, startBudgetPart } from './serve-budget.js';
import { ENVOY_FLAGS, ENVOY_FLAGS_HELP, type EnvoyPart, startEnvoyPart } from './serve-envoy.js';
import { GUARD_FLAGS, GUARD_FLAGS_HELP, guardSettings } from './serve-guard.js';

/** How long in-flight requests get to finish at shutdown before their connections are cut. */
const DRAIN_MS = 5000;

/**
 * A client has this long to send a request's headers, and its whole request: a connection that
 * dawdles (by accident, or to hold the server's sockets) is closed, the others are not slowed.
 */
const HEADERS_TIMEOUT_MS = 10_000;
const REQUEST_TIMEOUT_MS = 30_000;

const spec = {
  name: 'serve',
  summary: 'an HTTP rate-limit service: POST /v1/limit, on the memory store or Redis',
  flags: {
    ...COMMON_FLAGS,
    ...CONFIG_FLAGS,
    redis: { type: 'string' },
    timeout: { type: 'string' },
    host: { type: 'string' },
    port: { type: 'string' },
    'admin-token': { type: 'string' },
    ...BUDGET_FLAGS,
    ...ENVOY_FLAGS,
    ...GUARD_FLAGS,
  },
  help: `Usage: sluice serve [--config sluice.config.json] [--port 8080] [--host 127.0.0.1] [--redis URL]

A rate-limit service any language can call, with the policies of the config file:

  POST /v1/limit     {"policy": "api", "key": "client-42", "cost": 1}
                     -> 200 (allowed) or 429 (denied) with the decision as JSON, the headers to
                        forward (also set on the response), and the problem body when denied
  POST /v1/charge    {"policy": "tokens", "key": "user-7", "amount": 350}
                     -> usage known after the response, taken past the limit if need be (debt)
  POST /v1/reserve   {"policy": "tokens", "key": "user-7", "cost": 100}
                     -> the decision for the estimate and, when allowed, the reservation
  POST /v1/settle    {"policy": "tokens", "key": "user-7", "reserved": 100, "actual": 250}
                     -> the difference given back or charged (send each reservation once)
  GET  /v1/policies  the configured policies
  GET  /demo         a page behind the config's demo policy, keyed by the caller's address
  GET  /healthz      ok
  GET  /             in a browser: a live dashboard of each policy's decisions, store health and
                     most-denied identifiers (GET /dashboard/data is its JSON)
  GET  /metrics      Prometheus metrics

Malformed requests get 400 application/problem+json; the log counts them in one line every 10 s
at most. SIGTERM (or Ctrl-C) stops accepting, lets requests in flight finish, and exits 0 (130
after Ctrl-C).

Options:
  --port <n>          port to listen on (default: the config's serve.port, then 8080; 0 picks a free one)
  --host <address>    address to listen on (default: the config's serve.host, then 127.0.0.1)
  --redis <url>       keep state in Redis (host:port, redis://[user:password@]host:port[/db]) instead
                      of this process's memory; several instances then share limits. Without the
                      flag, ${DEFAULT_URL} is not used: the memory store is.
  --timeout <time>    how long to wait for Redis at start (default 5s)
  --admin-token <t>   the token the dashboard and /metrics ask for (default: $SLUICE_ADMIN_TOKEN), sent as
                      "Authorization: Bearer <t>" or as a Basic password. On loopback they are open
                      without one; beyond loopback (e.g. --host 0.0.0.0) they are off without one.
                      The environment variable keeps the token out of the process list.
${BUDGET_FLAGS_HELP}
${ENVOY_FLAGS_HELP}
${CONFIG_FLAGS_HELP}

${GUARD_FLAGS_HELP}


${COMMON_FLAGS_HELP}`,
} as const;

export interface ServeOptions {
  readonly config: Config;
  readonly prefix: string;
  readonly port: number;
  readonly host: string;
  readonly timeoutMs: number;
  readonly redis: string | undefined;
  readonly adminToken: string | undefined;
  /** The overload guard's settings; undefined with `--no-shed`. */
  readonly guard: GuardSettings | undefined;
}

function parse(values: Values): ServeOptions {
  const config = loadConfig(stringFlag(values, 'config'));
  if (config.policies.size === 0)
    throw new CliError(`${config.path ?? 'The config'} defines no policies to serve.`);
  const tokenFlag = stringFlag(values, 'admin-token');
  const envToken = process.env.SLUICE_ADMIN_TOKEN;
  return {
    config,
    prefix: stringFlag(values, 'prefix') ?? config.prefix,
    port: optional(
      values,
      'port',
      (flag, text) => (text === '0' ? 0 : parsePositiveInteger(flag, text, 65_535)),
      config.serve.port,
    ),
    host: stringFlag(values, 'host') ?? config.serve.host,
    timeoutMs: optional(values, 'timeout', parseDuration, 5000),
    redis: stringFlag(values, 'redis'),
    adminToken:
      tokenFlag !== undefined
        ? checkAdminToken(tokenFlag, '--admin-token')
        : envToken === undefined
          ? undefined
          : checkAdminToken(envToken, '$SLUICE_ADMIN_TOKEN'),
    guard: guardSettings(values),
  };
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: NodeJS.ErrnoException): void => {
      reject(
        new CliError(
          error.code === 'EADDRINUSE'
            ? `Port ${port} on ${host} is already in use (--port chooses another).`
            : `Cannot listen on ${host}:${port}: ${error.message}`,
        ),
      );
    };
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * The recorder the limiters report to, also heard for the store's health: a policy whose store
 * failed (see buildLimiters) says once that it answers again. Nothing is added per decision.
 */
function hearingHealth(
  recorder: MetricsRecorder | undefined,
  failing: Set<string>,
  log: (line: string) => void,
): MetricsRecorder {
  return {
    register: (limiter) => recorder?.register(limiter),
    record: (decision, context) => recorder?.record(decision, context),
    budget: (name, view) => recorder?.budget?.(name, view),
    health: (name, up, shard) => {
      recorder?.health(name, up, shard);
      if (up && failing.delete(name)) log(`sluice serve: policy ${name}: Redis answers again`);
    },
    listDenied: (name, list) => recorder?.listDenied?.(name, list),
  };
}

/**
 * One limiter per policy, with `extra` options (the dashboard's metrics recorder). Store failures
 * are decided by each policy's onStoreError; the log gets one line per policy and outage.
 */
function buildLimiters(
  config: Config,
  store: Store,
  extra: Partial<LimiterOptions>,
  log: (line: string) => void,
  budget: BudgetPart | undefined,
): Map<string, Limiter> {
  const limiters = new Map<string, Limiter>();
  const failing = new Set<string>();
  const metrics = hearingHealth(extra.metrics, failing, log);
  for (const [name, policy] of config.policies) {
    const shared = budget?.budgetFor(name, policy);
    try {
      const limiter = createLimiter({
        ...extra,
        store,
        policy,
        name,
        ...config.failure.get(name),
        overrides: config.overrides.has(name),
        ...(shared === undefined ? {} : { budget: shared }),
        metrics,
        onError: (error) => {
          if (failing.has(name)) return;
          failing.add(name);
          log(
            `sluice serve: policy ${name}: ${errorText(error)}; deciding by onStoreError until Redis answers`,
          );
        },
      });
      limiters.set(name, limiter);
    } catch (error) {
      if (error instanceof SluiceError)
        throw new CliError(`policy ${name}: ${error.message}`, { cause: error });
      throw error;
    }
  }
  return limiters;
}

/** Stops the background work of limiters that share a budget (their ledger calls). */
function closeLimiters(limiters: ReadonlyMap<string, Limiter>): void {
  for (const limiter of limiters.values()) (limiter as { close?: () => void }).close?.();
}

/** What runs beside the HTTP service, started before it listens and stopped after it drained. */
export interface Parts {
  readonly monitor: Monitor;
  readonly envoy: EnvoyPart | undefined;
  readonly budget: BudgetPart | undefined;
  /** Admits the service's work while it has room (HTTP and gRPC alike); none with `--no-shed`. */
  readonly guard: ServiceGuard | undefined;
  /** The routes they add to the service. */
  readonly routes: readonly Route[];
  close(): Promise<void>;
}

/**
 * The dashboard and /metrics (whose recorder every limiter reports to), and Envoy's gRPC service
 * with `--envoy`. A new part starts here, adds its routes to `routes`, and stops in `close`.
 */
async function startParts(
  context: Context,
  options: ServeOptions,
  store: Store,
  connection: Connection | undefined,
  storeText: string,
): Promise<Parts & { readonly limiters: Map<string, Limiter> }> {
  const budget = await startBudgetPart(context.values, options.config, options.prefix);
  // One guard for the whole process: HTTP and gRPC calls share the one event loop they would overload.
  const guard = options.guard === undefined ? undefined : new ServiceGuard(options.guard);
  const monitor = await startMonitor({
    config: options.config,
    store: storeText,
    token: options.adminToken,
    guard,
  });
  let limiters: Map<string, Limiter> | undefined;
  let envoy: EnvoyPart | undefined;
  try {
    limiters = buildLimiters(options.config, store, { metrics: monitor.metrics }, context.err, budget);
    envoy = await startEnvoyPart(
      context.values,
      store,
      connection,
      context.err,
      monitor.registry,
      budget,
      guard,
      monitor.metrics,
    );
  } catch (error) {
    if (limiters !== undefined) closeLimiters(limiters);
    monitor.close();
    await budget?.close();
    throw error;
  }
  const built = limiters;
  return {
    limiters: built,
    monitor,
    envoy,
    budget,
    guard,
    routes: [...adminRouteList(monitor.routes), ...(envoy?.routes ?? [])],
    async close() {
      await envoy?.close(DRAIN_MS);
      guard?.close();
      closeLimiters(built);
      monitor.close();
      await budget?.close();
    },
  };
}

/** Resolves with the signal's name at SIGTERM, or at Ctrl-C (which aborts `signal`). */
function stopSignal(signal: AbortSignal): Promise<string> {
  return new Promise((resolve) => {
    const onTerm = (): void => resolve('SIGTERM');
    process.once('SIGTERM', onTerm);
    signal.addEventListener(
      'abort',
      () => {
        process.off('SIGTERM', onTerm);
        resolve('SIGINT');
      },
      { once: true },
    );
  });
}

/** Stops accepting, lets requests in flight finish (DRAIN_MS at most), then cuts what is left. */
function drain(server: Server): Promise<void> {
  return new Promise((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    // Keep-alive connections with no request would hold close() open.
    server.closeIdleConnections();
  });
}

async function run(context: Context): Promise<number> {
  const options = parse(context.values);
  const connection =
    options.redis === undefined
      ? undefined
      : await connect(options.redis, options.timeoutMs, { persistent: true });
  const store: Store =
    connection === undefined
      ? new MemoryStore({ prefix: options.prefix })
      : new RedisStore({ client: connection.client, prefix: options.prefix });
  const storeText =
    connection === undefined ? 'the memory store' : `${connection.server} at ${connection.label}`;
  let parts: Awaited<ReturnType<typeof startParts>>;
  try {
    // Loads the scripts now, not while the first request waits (see RedisStore.ready).
    if (store instanceof RedisStore) await store.ready();
    parts = await startParts(context, options, store, connection, storeText);
  } catch (error) {
    await connection?.close();
    throw error;
  }
  const { limiters } = parts;
  const demoName = options.config.serve.demoPolicy;
  const log = new RequestLog(context.err);
  const service = createService({
    limiters,
    demo: demoName === undefined ? undefined : limiters.get(demoName),
    headers: options.config.serve.headers,
    log,
    routes: parts.routes,
    guard: parts.guard,
  });
  const server = createServer(
    { headersTimeout: HEADERS_TIMEOUT_MS, requestTimeout: REQUEST_TIMEOUT_MS },
    service.listener,
  );
  server.on('clientError', service.clientError);
  try {
    await listen(server, options.port, options.host);
  } catch (error) {
    await parts.close();
    await connection?.close();
    throw error;
  }
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : options.port;
  const where = `http://${options.host.includes(':') ? `[${options.host}]` : options.host}:${bound}`;
  const boundAddress = typeof address === 'object' && address !== null ? address.address : options.host;
  context.out(banner(context, where, options, storeText, connection, parts, limiters, boundAddress));

  const reason = await stopSignal(context.signal);
  context.err(`sluice serve: ${reason}: finishing requests in flight, then stopping`);
  const partsClosed = parts.close();
  await drain(server);
  await partsClosed;
  log.flush();
  if (store instanceof MemoryStore) store.close();
  await connection?.close();
  context.out('sluice serve: stopped');
  return EXIT.OK;
}

/** `sluice serve`. */
export const serve: Command = { ...spec, run };
