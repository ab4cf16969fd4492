// RateLimitResponse in protobuf's wire format, written directly into its gRPC frame: the bytes the proto loader's codec
// writes for the same message (test/envoy/response-codec holds it to that), without its objects on every call.
import { PREFIX_BYTES } from './grpc-wire.js';
import type {
  CurrentLimitMessage,
  DescriptorStatusMessage,
  HeaderValueMessage,
  RateLimitResponseMessage,
} from './messages.js';

/** A varint field's key: field number and wire type 0. */
const varintKey = (field: number): number => field << 3;
/** A length-delimited field's key: field number and wire type 2. */
const bytesKey = (field: number): number => (field << 3) | 2;

/** The bytes a varint of `value` (a whole number, 0 to 2^53) takes. */
function varintSize(value: number): number {
  let size = 1;
  while (value >= 128) {
    value = Math.floor(value / 128);
    size++;
  }
  return size;
}

/** Whether a number is one the codec writes as this varint: a whole number from 0 to `most`. */
function unsigned(value: number, most = 0xffff_ffff): boolean {
  return Number.isSafeInteger(value) && value >= 0 && value <= most;
}

function stringSize(text: string): number {
  const bytes = Buffer.byteLength(text);
  return varintSize(bytes) + bytes;
}

function limitSize(limit: CurrentLimitMessage): number {
  return 1 + varintSize(limit.requests_per_unit) + 1 + varintSize(limit.unit) + 1 + stringSize(limit.name);
}

function resetSize(reset: { readonly seconds: number; readonly nanos: number }): number {
  return 1 + varintSize(reset.seconds) + 1 + varintSize(reset.nanos);
}

function statusSize(status: DescriptorStatusMessage): number {
  let size = 1 + varintSize(status.code);
  const limit = status.current_limit;
  if (limit !== null) {
    const inner = limitSize(limit);
    size += 1 + varintSize(inner) + inner;
  }
  size += 1 + varintSize(status.limit_remaining);
  const reset = status.duration_until_reset;
  if (reset !== null) {
    const inner = resetSize(reset);
    size += 1 + varintSize(inner) + inner;
  }
  return size;
}

function headerSize(header: HeaderValueMessage): number {
  return 1 + stringSize(header.key) + 1 + stringSize(header.value);
}

/** Whether every number in the response is one this writer encodes as the codec does (else: undefined below). */
function plain(response: RateLimitResponseMessage): boolean {
  if (response.raw_body !== undefined || response.dynamic_metadata !== undefined) return false;
  if (!unsigned(response.overall_code, 0x7fff_ffff)) return false;
  for (const status of response.statuses) {
    if (!unsigned(status.code, 0x7fff_ffff) || !unsigned(status.limit_remaining)) return false;
    const limit = status.current_limit;
    if (limit !== null && (!unsigned(limit.requests_per_unit) || !unsigned(limit.unit, 0x7fff_ffff)))
      return false;
    const reset = status.duration_until_reset;
    if (
      reset !== null &&
      (!unsigned(reset.seconds, Number.MAX_SAFE_INTEGER) || !unsigned(reset.nanos, 999_999_999))
    )
      return false;
  }
  return true;
}

/** Writes into a buffer from a position that moves on. */
class Writer {
  at: number;
  constructor(
    readonly buffer: Buffer,
    at: number,
  ) {
    this.at = at;
  }

  varint(value: number): void {
    const buffer = this.buffer;
    while (value >= 128) {
      buffer[this.at++] = (value % 128) | 128;
      value = Math.floor(value / 128);
    }
    buffer[this.at++] = value;
  }

  string(text: string): void {
    const length = Buffer.byteLength(text);
    this.varint(length);
    this.at += this.buffer.write(text, this.at, length, 'utf8');
  }
}

/**
 * The response framed for gRPC (the uncompressed flag and the length, then the message), or
 * undefined for one this writer leaves to the codec: with a body (`raw_body`) or dynamic metadata,
 * or a number outside what it writes (negative, fractional, past 2^53). Every field is written,
 * zero or empty included, in field-number order, as the codec writes a message it built from
 * these objects; absent sub-messages (null) are left out.
 */
export function framedResponse(response: RateLimitResponseMessage): Buffer | undefined {
  if (!plain(response)) return undefined;
  // Sizes are measured again as they are written (a few additions), rather than kept in arrays made per call.
  let size = 1 + varintSize(response.overall_code);
  const { statuses } = response;
  for (let i = 0; i < statuses.length; i++) {
    const inner = statusSize(statuses[i] as DescriptorStatusMessage);
    size += 1 + varintSize(inner) + inner;
  }
  size += headersSize(response.response_headers_to_add) + headersSize(response.request_headers_to_add);
  const buffer = Buffer.allocUnsafe(PREFIX_BYTES + size);
  buffer[0] = 0;
  buffer.writeUInt32BE(size, 1);
  const out = new Writer(buffer, PREFIX_BYTES);
  out.varint(varintKey(1));
  out.varint(response.overall_code);
  for (let i = 0; i < statuses.length; i++) {
    const status = statuses[i] as DescriptorStatusMessage;
    out.varint(bytesKey(2));
    out.varint(statusSize(status));
    out.varint(varintKey(1));
    out.varint(status.code);
    const limit = status.current_limit;
    if (limit !== null) {
      out.varint(bytesKey(2));
      out.varint(limitSize(limit));
      out.varint(varintKey(1));
      out.varint(limit.requests_per_unit);
      out.varint(varintKey(2));
      out.varint(limit.unit);
      out.varint(bytesKey(3));
      out.string(limit.name);
    }
    out.varint(varintKey(3));
    out.varint(status.limit_remaining);
    const reset = status.duration_until_reset;
    if (reset !== null) {
      out.varint(bytesKey(4));
      out.varint(resetSize(reset));
      out.varint(varintKey(1));
      out.varint(reset.seconds);
      out.varint(varintKey(2));
      out.varint(reset.nanos);
    }
  }
  writeHeaders(out, 3, response.response_headers_to_add);
  writeHeaders(out, 4, response.request_headers_to_add);
  return buffer;
}

/** What a list of headers adds to the message: each a length-delimited field. */
function headersSize(headers: readonly HeaderValueMessage[]): number {
  let size = 0;
  for (let i = 0; i < headers.length; i++) {
    const inner = headerSize(headers[i] as HeaderValueMessage);
    size += 1 + varintSize(inner) + inner;
  }
  return size;
}

function writeHeaders(out: Writer, field: number, headers: readonly HeaderValueMessage[]): void {
  for (let i = 0; i < headers.length; i++) {
    const header = headers[i] as HeaderValueMessage;
    out.varint(bytesKey(field));
    out.varint(headerSize(header));
    out.varint(bytesKey(1));
    out.string(header.key);
    out.varint(bytesKey(2));
    out.string(header.value);
  }
}
