// A real grpc-js client of the Envoy services, built from the service's own .proto files; the
// messages' shapes. Imports nothing of node:test, so the benchmark can use it too.
import { join } from 'node:path';
import { credentials, loadPackageDefinition, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { ROOT } from '../paths.js';

export const PROTO_DIR = join(ROOT, 'packages', 'server', 'src', 'envoy', 'proto');
export const FIXTURES = join(ROOT, 'test', 'envoy', 'fixtures');

export interface Entry {
  key: string;
  value?: string;
}

export interface Descriptor {
  entries: Entry[];
  limit?: { requests_per_unit: number; unit: number };
  hits_addend?: { value: number };
}

export interface RateLimitRequest {
  domain: string;
  descriptors: Descriptor[];
  hits_addend?: number;
}

export interface DescriptorStatus {
  code: number;
  current_limit: { name: string; requests_per_unit: number; unit: number } | null;
  limit_remaining: number;
  duration_until_reset: { seconds: number; nanos: number } | null;
}

/** `google.protobuf.Value` as the client decodes it: the field of its kind set (protobufjs names them in camelCase). */
export interface StructValue {
  nullValue?: number;
  numberValue?: number;
  stringValue?: string;
  boolValue?: boolean;
  structValue?: Struct;
  listValue?: { values: StructValue[] };
}

export interface Struct {
  fields: Record<string, StructValue>;
}

export interface RateLimitResponse {
  overall_code: number;
  statuses: DescriptorStatus[];
  response_headers_to_add: { key: string; value: string }[];
  raw_body: Buffer;
  dynamic_metadata: Struct | null;
}

function valueToJson(value: StructValue): unknown {
  if (value.structValue !== undefined && value.structValue !== null) return structToJson(value.structValue);
  if (value.listValue !== undefined && value.listValue !== null)
    return value.listValue.values.map(valueToJson);
  if (value.stringValue !== undefined && value.stringValue !== null) return value.stringValue;
  if (value.numberValue !== undefined && value.numberValue !== null) return value.numberValue;
  if (value.boolValue !== undefined && value.boolValue !== null) return value.boolValue;
  return null;
}

/** A decoded `google.protobuf.Struct` as the JSON object it carries. */
export function structToJson(struct: Struct): Record<string, unknown> {
  return Object.fromEntries(Object.entries(struct.fields).map(([key, value]) => [key, valueToJson(value)]));
}

export const OK = 1;
export const OVER_LIMIT = 2;
export const UNIT = {
  UNKNOWN: 0,
  SECOND: 1,
  MINUTE: 2,
  HOUR: 3,
  DAY: 4,
  MONTH: 5,
  YEAR: 6,
  WEEK: 7,
} as const;

type Callback<T> = (error: ServiceError | null, value: T) => void;
interface RateLimitClient {
  ShouldRateLimit(
    request: RateLimitRequest,
    options: { deadline: number },
    callback: Callback<RateLimitResponse>,
  ): void;
  close(): void;
}
interface HealthClient {
  Check(
    request: { service: string },
    options: { deadline: number },
    callback: Callback<{ status: number }>,
  ): void;
  close(): void;
}

const definition = loadSync(['envoy/service/ratelimit/v3/rls.proto', 'grpc/health/v1/health.proto'], {
  includeDirs: [PROTO_DIR],
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: true,
});
// biome-ignore lint/suspicious/noExplicitAny: the loaded package is untyped by nature.
const loaded = loadPackageDefinition(definition) as any;

/** A client of both services on one address. */
export class EnvoyClient {
  readonly #rateLimit: RateLimitClient;
  readonly #health: HealthClient;

  constructor(address: string) {
    this.#rateLimit = new loaded.envoy.service.ratelimit.v3.RateLimitService(
      address,
      credentials.createInsecure(),
    );
    this.#health = new loaded.grpc.health.v1.Health(address, credentials.createInsecure());
  }

  /** ShouldRateLimit; rejects with the ServiceError (its `code` is the gRPC status). */
  shouldRateLimit(request: RateLimitRequest, timeoutMs = 10_000): Promise<RateLimitResponse> {
    return new Promise((resolve, reject) => {
      this.#rateLimit.ShouldRateLimit(request, { deadline: Date.now() + timeoutMs }, (error, response) =>
        error === null ? resolve(response) : reject(error),
      );
    });
  }

  /** The health status number (1 SERVING, 2 NOT_SERVING); rejects with the ServiceError. */
  health(service = ''): Promise<number> {
    return new Promise((resolve, reject) => {
      this.#health.Check({ service }, { deadline: Date.now() + 10_000 }, (error, response) =>
        error === null ? resolve(response.status) : reject(error),
      );
    });
  }

  close(): void {
    this.#rateLimit.close();
    this.#health.close();
  }
}
