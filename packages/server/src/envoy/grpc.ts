// The gRPC server: envoy.service.ratelimit.v3.RateLimitService and grpc.health.v1.Health on @grpc/grpc-js.
import {
  type GrpcObject,
  loadPackageDefinition,
  type MethodDefinition,
  Server,
  ServerCredentials,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceClientConstructor,
  type ServiceDefinition,
  type sendUnaryData,
  status,
  type UntypedServiceImplementation,
} from '@grpc/grpc-js';
import { fromJSON, type Options } from '@grpc/proto-loader';
import { type EnvoyBounds, messageTooLarge } from './bounds.js';
import { type RateLimitRequestMessage, RequestRefused, toWire, type WireResponse } from './messages.js';
import type { EnvoyMetrics } from './metrics.js';
import { PROTO_JSON } from './proto.generated.js';
import type { EnvoyService } from './service.js';

/**
 * How messages are read: field names as in the .proto files, enums and 64-bit numbers as numbers,
 * and absent message fields as null (so an absent `hits_addend` differs from one set to 0).
 */
export const LOADER_OPTIONS: Options = { keepCase: true, longs: Number, enums: Number, defaults: true };

/** The names a health check may ask about: the server as a whole, the reference's, and the service's. */
export const HEALTH_SERVICES = ['', 'ratelimit', 'envoy.service.ratelimit.v3.RateLimitService'];

const SERVING = 1;
const NOT_SERVING = 2;
const SERVICE_UNKNOWN = 3;
/** How often a Watch call looks at the health again. */
const WATCH_INTERVAL_MS = 1000;

function at(root: GrpcObject, path: string): ServiceClientConstructor {
  let node: unknown = root;
  for (const part of path.split('.')) node = (node as Record<string, unknown>)[part];
  return node as ServiceClientConstructor;
}

/** The services' definitions, built from the embedded .proto files. */
export function loadServices(): { rateLimit: ServiceClientConstructor; health: ServiceClientConstructor } {
  const root = loadPackageDefinition(fromJSON(PROTO_JSON as never, LOADER_OPTIONS));
  return {
    rateLimit: at(root, 'envoy.service.ratelimit.v3.RateLimitService'),
    health: at(root, 'grpc.health.v1.Health'),
  };
}

export interface GrpcOptions {
  readonly service: EnvoyService;
  /** `maxMessageBytes`: a larger message is refused before it is decoded. */
  readonly bounds: EnvoyBounds;
  /** Whether the service can answer: a config is loaded and the store answers. */
  readonly healthy: () => Promise<boolean>;
  readonly metrics: EnvoyMetrics | undefined;
  /** Errors that are the service's, not the caller's. */
  readonly onError: (error: unknown) => void;
}

/** A started gRPC server. */
export interface GrpcServer {
  readonly port: number;
  /** Stops accepting, lets calls in flight finish (up to `graceMs`), then cuts the rest. */
  close(graceMs: number): Promise<void>;
}

const GRPC_STATUS = { INVALID_ARGUMENT: status.INVALID_ARGUMENT, UNAVAILABLE: status.UNAVAILABLE } as const;

/** What the guarded decoder hands over for a message past the size bound: its size, not its content. */
class Oversized {
  constructor(readonly bytes: number) {}
}

/**
 * The RateLimitService definition with its request decoder guarded: a message over
 * `maxMessageBytes` is not decoded (decoding is where a large message would cost time and memory),
 * and its handler refuses it.
 */
function guardedDefinition(definition: ServiceDefinition, maxMessageBytes: number): ServiceDefinition {
  const method = definition.ShouldRateLimit as MethodDefinition<RateLimitRequestMessage, WireResponse>;
  const decode = method.requestDeserialize;
  const requestDeserialize = (bytes: Buffer): RateLimitRequestMessage | Oversized =>
    bytes.length > maxMessageBytes ? new Oversized(bytes.length) : decode(bytes);
  return { ...definition, ShouldRateLimit: { ...method, requestDeserialize } };
}

/** ShouldRateLimit: the service's answer, its refusals as gRPC statuses, anything else INTERNAL. */
function rateLimitHandlers(options: GrpcOptions): UntypedServiceImplementation {
  const { service, metrics } = options;
  return {
    ShouldRateLimit(
      call: ServerUnaryCall<RateLimitRequestMessage | Oversized, WireResponse>,
      callback: sendUnaryData<WireResponse>,
    ): void {
      const done = metrics?.call('ShouldRateLimit');
      const request = call.request;
      const answer =
        request instanceof Oversized
          ? Promise.reject(messageTooLarge(request.bytes, options.bounds))
          : service.shouldRateLimit(request);
      answer.then(
        (response) => {
          done?.();
          callback(null, toWire(response));
        },
        (error: unknown) => {
          done?.();
          if (error instanceof RequestRefused) {
            if (error.status === 'INVALID_ARGUMENT') metrics?.error('service_error');
            callback({ code: GRPC_STATUS[error.status], details: error.message });
            return;
          }
          options.onError(error);
          callback({ code: status.INTERNAL, details: 'the rate limit service failed on this call' });
        },
      );
    },
  };
}

/** grpc.health.v1.Health: Check, and Watch (looked at again every second, written when it changes). */
function healthHandlers(options: GrpcOptions): UntypedServiceImplementation {
  const healthOf = async (name: string): Promise<number> => {
    if (!HEALTH_SERVICES.includes(name)) return SERVICE_UNKNOWN;
    return (await options.healthy()) ? SERVING : NOT_SERVING;
  };
  return {
    Check(
      call: ServerUnaryCall<{ service: string }, { status: number }>,
      callback: sendUnaryData<{ status: number }>,
    ) {
      const name = call.request.service ?? '';
      healthOf(name).then(
        (health) =>
          health === SERVICE_UNKNOWN
            ? callback({ code: status.NOT_FOUND, details: `unknown service ${JSON.stringify(name)}` })
            : callback(null, { status: health }),
        (error: unknown) => callback({ code: status.INTERNAL, details: String(error) }),
      );
    },
    Watch(call: ServerWritableStream<{ service: string }, { status: number }>) {
      let last = -1;
      let stopped = false;
      const look = (): void => {
        healthOf(call.request.service ?? '').then((health) => {
          if (stopped || health === last) return;
          last = health;
          call.write({ status: health });
        }, options.onError);
      };
      const timer = setInterval(look, WATCH_INTERVAL_MS);
      call.on('cancelled', () => {
        stopped = true;
        clearInterval(timer);
      });
      look();
    },
  };
}

/** Stops accepting, lets calls in flight finish (up to `graceMs`), then cuts the rest. */
function closeWithin(server: Server, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const cut = setTimeout(() => {
      server.forceShutdown();
      resolve();
    }, graceMs);
    server.tryShutdown(() => {
      clearTimeout(cut);
      resolve();
    });
  });
}

/** Starts the gRPC server on host:port (0 picks a free port). */
export async function startGrpc(options: GrpcOptions, host: string, port: number): Promise<GrpcServer> {
  const definitions = loadServices();
  const server = new Server();
  server.addService(
    guardedDefinition(definitions.rateLimit.service, options.bounds.maxMessageBytes),
    rateLimitHandlers(options),
  );
  server.addService(definitions.health.service, healthHandlers(options));
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address, ServerCredentials.createInsecure(), (error, actual) => {
      if (error === null) resolve(actual);
      else reject(error);
    });
  });
  return { port: bound, close: (graceMs) => closeWithin(server, graceMs) };
}
