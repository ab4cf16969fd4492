// Descriptor `metadata`: read from YAML, merged over the descriptors that passed, returned as Envoy's dynamic metadata.
import { type FileReader, isAbsent } from './config-reader.js';
import type { DescriptorMessage } from './messages.js';
import { shown, type YamlValue } from './yaml-reader.js';

/** A JSON value, as `google.protobuf.Value` carries it. */
export type MetadataValue = null | boolean | number | string | readonly MetadataValue[] | MetadataObject;
export interface MetadataObject {
  readonly [key: string]: MetadataValue;
}

/** A YAML value as plain JSON: maps, lists, numbers, booleans, null, and any other scalar as its text. */
function toJson(value: YamlValue): MetadataValue {
  if (value.kind === 'map') {
    const object: Record<string, MetadataValue> = {};
    for (const [key, entry] of value.map.entries) object[key] = toJson(entry);
    return object;
  }
  if (value.kind === 'list') return value.items.map(toJson);
  const scalar = value.value;
  if (scalar === null || typeof scalar === 'boolean' || typeof scalar === 'string') return scalar;
  if (typeof scalar === 'number') return scalar;
  // Timestamps, binary and the like: the text as written, which a JSON value can carry.
  return value.text;
}

/**
 * A descriptor's `metadata`: any map (its keys are free, unlike the config's), kept as JSON; an
 * empty one is none, as the reference reads it.
 */
export function readMetadata(reader: FileReader, value: YamlValue | undefined): MetadataObject | undefined {
  if (value === undefined || isAbsent(value)) return undefined;
  if (value.kind !== 'map') {
    reader.fail(value.line, `config error, expected 'metadata' to be a map, got ${shown(value)}`);
  }
  if (value.map.entries.size === 0) return undefined;
  return toJson(value) as MetadataObject;
}

function isObject(value: MetadataValue | undefined): value is MetadataObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Merges `from` into `into` as the reference does: a key already there keeps its value (the first
 * passing descriptor wins), except that two maps merge key by key. `into` is a fresh object; the
 * config's own metadata is never written to.
 */
export function mergeMetadata(into: Record<string, MetadataValue>, from: MetadataObject): void {
  for (const [key, value] of Object.entries(from)) {
    const present = into[key];
    if (present === undefined) into[key] = isObject(value) ? { ...value } : value;
    else if (isObject(present) && isObject(value)) {
      const merged = { ...present };
      mergeMetadata(merged, value);
      into[key] = merged;
    }
  }
}

const OVERRIDE_UNIT_NAMES = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR', 'WEEK'];

/** A descriptor as the reference describes it in the metadata: `key=value` entries, its limit and hits. */
function describeDescriptor(descriptor: DescriptorMessage): MetadataObject {
  const out: Record<string, MetadataValue> = {
    entries: (descriptor.entries ?? []).map((entry) => `${entry.key}=${entry.value}`),
  };
  const limit = descriptor.limit;
  if (limit !== undefined && limit !== null) {
    // The override in protobuf's text form, zero fields left out, as the reference prints it.
    const parts: string[] = [];
    if ((limit.requests_per_unit ?? 0) !== 0) parts.push(`requests_per_unit:${limit.requests_per_unit}`);
    if ((limit.unit ?? 0) !== 0) parts.push(`unit:${OVERRIDE_UNIT_NAMES[limit.unit ?? 0] ?? limit.unit}`);
    out.limit = parts.join(' ');
  }
  const hits = descriptor.hits_addend;
  if (hits !== undefined && hits !== null) out.hitsAddend = Number(hits.value ?? 0);
  return out;
}

/**
 * The response's dynamic metadata (Envoy stores it under the rate limit filter's namespace, where
 * routes and load balancing read it): the domain, each descriptor, the request's hits when set, and
 * the merged `metadata` of the descriptors that passed, in request order.
 */
export function dynamicMetadata(
  domain: string,
  descriptors: readonly DescriptorMessage[],
  requestHits: number,
  passed: readonly MetadataObject[],
): MetadataObject {
  const out: Record<string, MetadataValue> = {
    domain,
    descriptors: descriptors.map(describeDescriptor),
  };
  if (requestHits !== 0) out.hitsAddend = requestHits;
  const merged: Record<string, MetadataValue> = {};
  for (const metadata of passed) mergeMetadata(merged, metadata);
  if (Object.keys(merged).length > 0) out.metadata = merged;
  return out;
}

/**
 * `google.protobuf.Value` as the proto loader encodes it (one field of its `kind` set). Its field names are
 * protobufjs's built-in definition's, in camelCase whatever the loader's `keepCase`.
 */
export type ValueMessage =
  | { readonly nullValue: 0 }
  | { readonly numberValue: number }
  | { readonly stringValue: string }
  | { readonly boolValue: boolean }
  | { readonly structValue: StructMessage }
  | { readonly listValue: { readonly values: readonly ValueMessage[] } };

/** `google.protobuf.Struct` as the proto loader encodes it. */
export interface StructMessage {
  readonly fields: Readonly<Record<string, ValueMessage>>;
}

function toValue(value: MetadataValue): ValueMessage {
  if (value === null) return { nullValue: 0 };
  if (typeof value === 'number') return { numberValue: value };
  if (typeof value === 'string') return { stringValue: value };
  if (typeof value === 'boolean') return { boolValue: value };
  if (Array.isArray(value)) return { listValue: { values: value.map(toValue) } };
  return { structValue: toStruct(value as MetadataObject) };
}

/** A JSON object as `google.protobuf.Struct`. */
export function toStruct(object: MetadataObject): StructMessage {
  const fields: Record<string, ValueMessage> = {};
  for (const [key, value] of Object.entries(object)) fields[key] = toValue(value);
  return { fields };
}
