// `sluice serve`: the rate-limit service on the memory store (or Redis), until SIGTERM or Ctrl-C.
import { createServer, type Server } from 'node:http';
import { createLimiter, type Limiter, MemoryStore, RedisStore, type Store } from '../index.js';
import {
  COMMON_FLAGS,
  COMMON_FLAGS_HELP,
  CONFIG_FLAGS,
  CONFIG_FLAGS_HELP,
  optional,
  parseDuration,
  parsePositiveInteger,
  stringFlag,
} from './args.js';
import type { Command, Context } from './command.js';
import { loadConfig } from './config.js';
import { checkAdminToken } from './dashboard/access.js';
import { startMonitor } from './dashboard/monitor.js';
import { CliError, EXIT, errorText } from './errors.js';
import { type Connection, connect, DEFAULT_URL } from './redis.js';
import { ENVOY_FLAGS, ENVOY_FLAGS_HELP, startEnvoyPart } from './serve-envoy.js';
import { createService } from './service.js';

/** How long in-flight requests get to finish at shutdown before their connections are cut. */
const DRAIN_MS = 5000;

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
    ...ENVOY_FLAGS,
  },
  help: `Usage: sluice serve [--config sluice.config.json] [--port 8080] [--host 127.0.0.1] [--redis URL]

A rate-limit service any language can call, with the policies of the config file:

  POST /v1/limit     {"policy": "api", "key": "client-42", "cost": 1}
                     -> 200 (allowed) or 429 (denied) with the decision as JSON, the headers to
                        forward (also set on the response), and the problem body when denied
  GET  /v1/policies  the configured policies
  GET  /demo         a page behind the config's demo policy, keyed by the caller's address
  GET  /healthz      ok
  GET  /             in a browser: a live dashboard of each policy's decisions, store health and
                     most-denied identifiers (GET /dashboard/data is its JSON)
  GET  /metrics      Prometheus metrics (needs prom-client installed)

Malformed requests get 400 application/problem+json. SIGTERM (or Ctrl-C) stops accepting,
lets requests in flight finish, and exits 0 (130 after Ctrl-C).

Options:
  --port <n>          port to listen on (default: the config's serve.port, then 8080; 0 picks a free one)
  --host <address>    address to listen on (default: the config's serve.host, then 127.0.0.1)
  --redis <url>       keep state in Redis (redis://[user:password@]host:port[/db]) instead of this
                      process's memory; several instances then share limits. Without the flag,
                      ${DEFAULT_URL} is not used: the memory store is.
  --timeout <time>    how long to wait for Redis at start (default 5s)
  --admin-token <t>   the token the dashboard and /metrics ask for (default: $SLUICE_ADMIN_TOKEN), sent as
                      "Authorization: Bearer <t>" or as a Basic password. On loopback they are open
                      without one; beyond loopback (e.g. --host 0.0.0.0) they are off without one.
                      The environment variable keeps the token out of the process list.
${ENVOY_FLAGS_HELP}
${CONFIG_FLAGS_HELP}
${COMMON_FLAGS_HELP}`,
} as const;

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

async function run(context: Context): Promise<number> {
  const { values, signal } = context;
  const config = loadConfig(stringFlag(values, 'config'));
  if (config.policies.size === 0)
    throw new CliError(`${config.path ?? 'The config'} defines no policies to serve.`);
  const prefix = stringFlag(values, 'prefix') ?? config.prefix;
  const port = optional(
    values,
    'port',
    (flag, text) => (text === '0' ? 0 : parsePositiveInteger(flag, text, 65_535)),
    config.serve.port,
  );
  const host = stringFlag(values, 'host') ?? config.serve.host;
  const timeoutMs = optional(values, 'timeout', parseDuration, 5000);
  const redisFlag = stringFlag(values, 'redis');
  const tokenFlag = stringFlag(values, 'admin-token');
  const envToken = process.env.SLUICE_ADMIN_TOKEN;
  const token =
    tokenFlag !== undefined
      ? checkAdminToken(tokenFlag, '--admin-token')
      : envToken === undefined
        ? undefined
        : checkAdminToken(envToken, '$SLUICE_ADMIN_TOKEN');

  let connection: Connection | undefined;
  let store: Store;
  if (redisFlag === undefined) store = new MemoryStore({ prefix });
  else {
    connection = await connect(redisFlag, timeoutMs, { persistent: true });
    store = new RedisStore({ client: connection.client, prefix });
  }
  const storeText =
    connection === undefined ? 'the memory store' : `${connection.server} at ${connection.label}`;
  const monitor = await startMonitor({ config, store: storeText, token });
  const limiters = new Map<string, Limiter>();
  // Store failures are decided by each policy's onStoreError; the log gets one line per policy and
  // outage, not one per request.
  const reported = new Set<string>();
  for (const [name, policy] of config.policies) {
    const limiter = createLimiter({
      store,
      policy,
      name,
      ...config.failure.get(name),
      metrics: monitor.metrics,
      onError: (error) => {
        if (reported.has(name)) return;
        reported.add(name);
        context.err(
          `sluice serve: policy ${name}: ${errorText(error)}; deciding by onStoreError until Redis answers`,
        );
      },
      onDecision: (decision) => {
        if (decision.reason === undefined && reported.delete(name))
          context.err(`sluice serve: policy ${name}: Redis answers again`);
      },
    });
    limiters.set(name, limiter);
  }
  const demo = config.serve.demoPolicy === undefined ? undefined : limiters.get(config.serve.demoPolicy);

  const service = createService({
    limiters,
    demo,
    headers: config.serve.headers,
    admin: monitor.routes,
    onError: (error) => context.err(`sluice serve: ${errorText(error)}`),
  });
  let envoy: Awaited<ReturnType<typeof startEnvoyPart>>;
  try {
    envoy = await startEnvoyPart(values, store, connection, context.err, monitor.registry);
  } catch (error) {
    monitor.close();
    await connection?.close();
    throw error;
  }
  const server = createServer((request, response) => {
    if (envoy?.http(request, response) !== true) service(request, response);
  });
  try {
    await listen(server, port, host);
  } catch (error) {
    monitor.close();
    await envoy?.close(0);
    await connection?.close();
    throw error;
  }
  const address = server.address();
  const bound = typeof address === 'object' && address !== null ? address.port : port;
  const where = `http://${host.includes(':') ? `[${host}]` : host}:${bound}`;
  const admin = monitor.listening(
    typeof address === 'object' && address !== null ? address.address : host,
    where,
  );
  if (context.json) {
    context.out(
      JSON.stringify({
        listening: where,
        store: connection === undefined ? 'memory' : connection.label,
        policies: [...limiters.keys()],
        config: config.path ?? null,
        dashboard: admin.dashboard,
        ...(envoy === undefined ? {} : { envoy: envoy.json }),
      }),
    );
  } else {
    // One write, so whoever waits for "listening" sees the whole banner.
    context.out(
      [
        `sluice serve: listening on ${where} with ${storeText}`,
        `  policies ${[...limiters.keys()].join(', ')} from ${config.path ?? 'the built-in config'}`,
        ...admin.lines,
        `  try: curl -i ${where}/demo   or   curl -i -d '{"policy":"${[...limiters.keys()][0]}","key":"client-42"}' ${where}/v1/limit`,
        ...(envoy === undefined ? [] : [envoy.banner]),
      ].join('\n'),
    );
  }

  // Runs until SIGTERM here, or Ctrl-C (which aborts `signal`).
  const stopping = new Promise<string>((resolve) => {
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
  const reason = await stopping;
  context.err(`sluice serve: ${reason}: finishing requests in flight, then stopping`);
  const envoyClosed = envoy?.close(DRAIN_MS);
  await new Promise<void>((resolve) => {
    const cut = setTimeout(() => server.closeAllConnections(), DRAIN_MS);
    server.close(() => {
      clearTimeout(cut);
      resolve();
    });
    // Keep-alive connections with no request would hold close() open.
    server.closeIdleConnections();
  });
  await envoyClosed;
  monitor.close();
  if (store instanceof MemoryStore) store.close();
  await connection?.close();
  context.out('sluice serve: stopped');
  return EXIT.OK;
}

/** `sluice serve`. */
export const serve: Command = { ...spec, run };
