// The service's messages as the proto loader decodes them (snake_case, enums and 64-bit numbers as numbers), and their JSON twins.
import type { Entry } from './match.js';
import { type MetadataObject, type StructMessage, toStruct } from './metadata.js';

/** `envoy.extensions.common.ratelimit.v3.RateLimitDescriptor`. */
export interface DescriptorMessage {
  readonly entries?: readonly Entry[] | null;
  readonly limit?: { readonly requests_per_unit?: number; readonly unit?: number } | null;
  /** Set (even to 0) only when the descriptor carries its own hits. */
  readonly hits_addend?: { readonly value?: number | string } | null;
}

/** `envoy.service.ratelimit.v3.RateLimitRequest`. */
export interface RateLimitRequestMessage {
  readonly domain?: string;
  readonly descriptors?: readonly DescriptorMessage[] | null;
  readonly hits_addend?: number;
}

export const CODE = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 } as const;

export interface CurrentLimitMessage {
  readonly name: string;
  readonly requests_per_unit: number;
  readonly unit: number;
}

export interface DescriptorStatusMessage {
  readonly code: number;
  readonly current_limit: CurrentLimitMessage | null;
  readonly limit_remaining: number;
  readonly duration_until_reset: { readonly seconds: number; readonly nanos: number } | null;
}

export interface HeaderValueMessage {
  readonly key: string;
  readonly value: string;
}

/** `envoy.service.ratelimit.v3.RateLimitResponse`, its dynamic metadata as plain JSON (see {@link toWire}). */
export interface RateLimitResponseMessage {
  readonly overall_code: number;
  readonly statuses: readonly DescriptorStatusMessage[];
  readonly response_headers_to_add: readonly HeaderValueMessage[];
  readonly request_headers_to_add: readonly HeaderValueMessage[];
  /** The body Envoy sends with a refusal; undefined for none. */
  readonly raw_body?: Buffer | undefined;
  readonly dynamic_metadata?: MetadataObject | undefined;
}

/** The response as the proto loader encodes it: the dynamic metadata as a `google.protobuf.Struct`. */
export type WireResponse = Omit<RateLimitResponseMessage, 'dynamic_metadata'> & {
  readonly dynamic_metadata: StructMessage | null;
};

/** The response as the proto loader encodes it. */
export function toWire(response: RateLimitResponseMessage): WireResponse {
  const metadata = response.dynamic_metadata;
  return { ...response, dynamic_metadata: metadata === undefined ? null : toStruct(metadata) };
}

/** A request the service refuses, with the gRPC status it is answered with. */
export class RequestRefused extends Error {
  constructor(
    readonly status: 'INVALID_ARGUMENT' | 'UNAVAILABLE',
    message: string,
  ) {
    super(message);
  }
}

const CODE_NAMES = ['UNKNOWN', 'OK', 'OVER_LIMIT'];
const UNIT_NAMES = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK'];

function field(object: Record<string, unknown>, snake: string): unknown {
  // Proto JSON accepts both the field's name and its lowerCamelCase JSON name.
  const camel = snake.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
  return object[camel] ?? object[snake];
}

function refuse(message: string): never {
  throw new RequestRefused('INVALID_ARGUMENT', message);
}

function objectAt(value: unknown, where: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    refuse(`Expected ${where} to be an object.`);
  return value as Record<string, unknown>;
}

function count(value: unknown, where: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  // Proto JSON writes 64-bit numbers as strings.
  const number = typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
  if (typeof number !== 'number' || !Number.isInteger(number) || number < 0) {
    refuse(`Expected ${where} to be a whole number of at least 0, got ${JSON.stringify(value)}.`);
  }
  return number;
}

/** Reads the JSON body of `POST /json` (proto JSON: camelCase or snake_case names, enums by name or number). */
export function requestFromJson(text: string): RateLimitRequestMessage {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch (error) {
    refuse(`The body is not JSON (${(error as Error).message}).`);
  }
  const root = objectAt(body, 'the body');
  const domain = root.domain ?? '';
  if (typeof domain !== 'string') refuse(`Expected "domain" to be a string, got ${JSON.stringify(domain)}.`);
  const list = root.descriptors ?? [];
  if (!Array.isArray(list)) refuse('Expected "descriptors" to be a list.');
  const descriptors = list.map((item: unknown, i): DescriptorMessage => {
    const descriptor = objectAt(item, `descriptors[${i}]`);
    const entries = (descriptor.entries ?? []) as unknown;
    if (!Array.isArray(entries)) refuse(`Expected descriptors[${i}].entries to be a list.`);
    const limit =
      descriptor.limit === undefined || descriptor.limit === null
        ? null
        : objectAt(descriptor.limit, `descriptors[${i}].limit`);
    const unit = limit === null ? undefined : field(limit, 'unit');
    const hits = count(field(descriptor, 'hits_addend'), `descriptors[${i}].hitsAddend`);
    return {
      entries: entries.map((raw: unknown, j): Entry => {
        const entry = objectAt(raw, `descriptors[${i}].entries[${j}]`);
        const key = entry.key ?? '';
        const value = entry.value ?? '';
        if (typeof key !== 'string' || typeof value !== 'string') {
          refuse(`Expected descriptors[${i}].entries[${j}] to have a string key and value.`);
        }
        return { key, value };
      }),
      limit:
        limit === null
          ? null
          : {
              requests_per_unit:
                count(field(limit, 'requests_per_unit'), `descriptors[${i}].limit.requestsPerUnit`) ?? 0,
              unit:
                typeof unit === 'string'
                  ? Math.max(0, UNIT_NAMES.indexOf(unit))
                  : (count(unit, `descriptors[${i}].limit.unit`) ?? 0),
            },
      hits_addend: hits === undefined ? null : { value: hits },
    };
  });
  return { domain, descriptors, hits_addend: count(field(root, 'hits_addend'), 'hitsAddend') ?? 0 };
}

/** The response as proto JSON prints it: camelCase, enums by name, durations as `"1.5s"`, defaults left out. */
export function responseToJson(response: RateLimitResponseMessage): Record<string, unknown> {
  const json: Record<string, unknown> = { overallCode: CODE_NAMES[response.overall_code] };
  json.statuses = response.statuses.map((status) => {
    const out: Record<string, unknown> = { code: CODE_NAMES[status.code] };
    if (status.current_limit !== null) {
      const limit = status.current_limit;
      out.currentLimit = {
        ...(limit.name === '' ? {} : { name: limit.name }),
        ...(limit.requests_per_unit === 0 ? {} : { requestsPerUnit: limit.requests_per_unit }),
        unit: UNIT_NAMES[limit.unit],
      };
    }
    if (status.limit_remaining !== 0) out.limitRemaining = status.limit_remaining;
    if (status.duration_until_reset !== null) {
      const { seconds, nanos } = status.duration_until_reset;
      out.durationUntilReset = `${nanos === 0 ? seconds : (seconds + nanos / 1e9).toFixed(3)}s`;
    }
    return out;
  });
  if (response.response_headers_to_add.length > 0)
    json.responseHeadersToAdd = response.response_headers_to_add;
  if (response.raw_body !== undefined) json.rawBody = response.raw_body.toString('base64');
  if (response.dynamic_metadata !== undefined) json.dynamicMetadata = response.dynamic_metadata;
  return json;
}
