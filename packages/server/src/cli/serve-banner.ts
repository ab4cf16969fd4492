// `sluice serve`'s start-up banner: what it listens on, with which store, policies and parts, as text or JSON.
import type { Limiter } from 'sluice';
import type { GuardSettings } from '../service/guard.js';
import type { Context } from './command.js';
import type { Connection } from './redis.js';
import type { Parts, ServeOptions } from './serve.js';

export function banner(
  context: Context,
  where: string,
  options: ServeOptions,
  storeText: string,
  connection: Connection | undefined,
  parts: Parts,
  limiters: ReadonlyMap<string, Limiter>,
  address: string,
): string {
  const names = [...limiters.keys()];
  const admin = parts.monitor.listening(address, where);
  if (context.json) {
    return JSON.stringify({
      listening: where,
      store: connection === undefined ? 'memory' : connection.label,
      policies: names,
      config: options.config.path ?? null,
      dashboard: admin.dashboard,
      guard: options.guard ?? null,
      ...(parts.budget === undefined ? {} : { budget: parts.budget.json }),
      ...(parts.envoy === undefined ? {} : { envoy: parts.envoy.json }),
    });
  }
  // One write, so whoever waits for "listening" sees the whole banner.
  return [
    `sluice serve: listening on ${where} with ${storeText}`,
    `  policies ${names.join(', ')} from ${options.config.path ?? 'the built-in config'}`,
    ...admin.lines,
    ...(parts.budget === undefined ? [] : [parts.budget.banner]),
    guardLine(options.guard),
    `  try: curl -i ${where}/demo   or   curl -i -d '{"policy":"${names[0]}","key":"client-42"}' ${where}/v1/limit`,
    ...(parts.envoy === undefined ? [] : [parts.envoy.banner]),
  ].join('\n');
}

/** The banner's line on the overload guard. */
function guardLine(guard: GuardSettings | undefined): string {
  if (guard === undefined) return '  overload guard off (--no-shed): every call is taken, however many';
  return `  overload guard: ${guard.initial} calls in flight at start (${guard.min}-${guard.max} as latency moves it), ${guard.streams} gRPC calls per connection; refusals in sluice_service_shed_total`;
}
