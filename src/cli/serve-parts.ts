// What a part of `sluice serve` plugs in beside the HTTP service: flags, limiter options, routes, a server of its own.
import type { Limiter, LimiterOptions } from '../index.js';
import type { FlagSpec, Values } from './args.js';
import type { Config } from './config.js';
import type { Route } from './service.js';

/** What a part is told when `sluice serve` starts. */
export interface PartContext {
  /** Every flag of the command line, the part's own among them. */
  readonly values: Values;
  readonly config: Config;
  /** Writes a line to stderr (for what happens once: a start, a stop, an outage). */
  readonly log: (line: string) => void;
}

/** What a part adds to a running service; every member optional. */
export interface PartPieces {
  /** Options given to every limiter the service builds (a metrics recorder, say). */
  readonly limiterOptions?: Partial<
    Omit<LimiterOptions, 'store' | 'policy' | 'name' | 'onError' | 'onDecision'>
  >;
  /** Routes added to the HTTP service; one with a built-in route's method and path replaces it. */
  routes?(limiters: ReadonlyMap<string, Limiter>): readonly Route[];
  /** Starts a server of its own once the limiters exist; resolves to a line for the banner. */
  start?(limiters: ReadonlyMap<string, Limiter>): Promise<string | undefined>;
  /** Stops what `start` started, after the HTTP service stopped taking requests. */
  stop?(): Promise<void>;
}

/**
 * A part of `sluice serve`: an Envoy gRPC server, metrics, a dashboard. Listed in serve.ts's
 * PARTS, it gets its flags parsed and shown in --help, and is set up before the limiters exist.
 *
 * @example
 * const hello: ServePart = {
 *   flags: { hello: { type: 'boolean' } },
 *   help: '  --hello             answer GET /hello',
 *   setup: ({ values }) =>
 *     values.hello === true
 *       ? { routes: () => [{ method: 'GET', path: '/hello', handle: (_, res) => void res.end('hi\n') }] }
 *       : undefined,
 * };
 */
export interface ServePart {
  readonly flags: Readonly<Record<string, FlagSpec>>;
  /** Its lines under Options in `sluice serve --help`. */
  readonly help: string;
  /** Returns what it adds, or undefined when its flags leave it off. Throw a CliError to refuse to start. */
  setup(context: PartContext): PartPieces | undefined | Promise<PartPieces | undefined>;
}
