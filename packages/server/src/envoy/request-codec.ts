// RateLimitRequest read from protobuf's wire format directly: the object the proto loader's codec makes of the same
// bytes (test/envoy/request-codec holds it to that), for the requests proxies send; anything else is left to the codec.
import type { Entry } from './match.js';
import type { DescriptorMessage, RateLimitRequestMessage } from './messages.js';

/** Gives up on a message: the codec reads it instead, as it always did. */
class Unusual extends Error {}
const UNUSUAL = new Unusual();

const VARINT = 0;
const FIXED64 = 1;
const BYTES = 2;
const FIXED32 = 5;

/** A read position in a message's bytes, up to `end`. */
class Reader {
  at: number;
  constructor(
    readonly bytes: Buffer,
    at: number,
    readonly end: number,
  ) {
    this.at = at;
  }

  /** A varint up to 2^53 (a longer one is unusual here). */
  varint(): number {
    const bytes = this.bytes;
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 8; i++) {
      if (this.at >= this.end) throw UNUSUAL;
      const byte = bytes[this.at++] as number;
      value += (byte & 127) * scale;
      if (byte < 128) {
        if (!Number.isSafeInteger(value)) throw UNUSUAL;
        return value;
      }
      scale *= 128;
    }
    throw UNUSUAL;
  }

  /** A varint read as uint32, as the codec keeps it: past 32 bits is unusual. */
  uint32(): number {
    const value = this.varint();
    if (value > 0xffff_ffff) throw UNUSUAL;
    return value;
  }

  /** A varint read as an enum (int32): past 2^31 - 1 is unusual. */
  enum(): number {
    const value = this.varint();
    if (value > 0x7fff_ffff) throw UNUSUAL;
    return value;
  }

  /** A length-delimited field's end. */
  delimited(): number {
    const length = this.varint();
    const end = this.at + length;
    if (end > this.end) throw UNUSUAL;
    return end;
  }

  string(): string {
    const end = this.delimited();
    const text = this.bytes.toString('utf8', this.at, end);
    this.at = end;
    return text;
  }

  /** A field's key: its number times 8 plus its wire type (field numbers are below 2^29). */
  key(): number {
    const key = this.varint();
    if (key > 0xffff_ffff) throw UNUSUAL;
    return key;
  }

  /** Skips a field of another number, as the codec does; groups are unusual. */
  skip(type: number): void {
    if (type === VARINT) this.varint();
    else if (type === FIXED64) this.at += 8;
    else if (type === BYTES) this.at = this.delimited();
    else if (type === FIXED32) this.at += 4;
    else throw UNUSUAL;
    if (this.at > this.end) throw UNUSUAL;
  }
}

/** Reads the fields of a message up to `end`: `field` takes the known ones (true), the rest are skipped. */
function fields(reader: Reader, end: number, field: (number: number, type: number) => boolean): void {
  while (reader.at < end) {
    const key = reader.key();
    const number = key >>> 3;
    const type = key & 7;
    if (number === 0) throw UNUSUAL;
    if (!field(number, type)) reader.skip(type);
  }
  if (reader.at !== end) throw UNUSUAL;
}

/** Requires a known field's wire type: the codec would read a mismatched one its own way. */
function expect(type: number, wanted: number): void {
  if (type !== wanted) throw UNUSUAL;
}

function entry(reader: Reader): Entry {
  const end = reader.delimited();
  let key = '';
  let value = '';
  fields(reader, end, (number, type) => {
    if (number === 1) {
      expect(type, BYTES);
      key = reader.string();
    } else if (number === 2) {
      expect(type, BYTES);
      value = reader.string();
    } else return false;
    return true;
  });
  return { key, value };
}

function override(reader: Reader): { requests_per_unit: number; unit: number } {
  const end = reader.delimited();
  let requests = 0;
  let unit = 0;
  fields(reader, end, (number, type) => {
    if (number === 1) {
      expect(type, VARINT);
      requests = reader.uint32();
    } else if (number === 2) {
      expect(type, VARINT);
      unit = reader.enum();
    } else return false;
    return true;
  });
  return { requests_per_unit: requests, unit };
}

/** google.protobuf.UInt64Value, its value a number (the codec's `longs: Number`). */
function uint64Value(reader: Reader): { value: number } {
  const end = reader.delimited();
  let value = 0;
  fields(reader, end, (number, type) => {
    if (number !== 1) return false;
    expect(type, VARINT);
    value = reader.varint();
    return true;
  });
  return { value };
}

function descriptor(reader: Reader): DescriptorMessage {
  const end = reader.delimited();
  const entries: Entry[] = [];
  let limit: DescriptorMessage['limit'] = null;
  let hits: DescriptorMessage['hits_addend'] = null;
  fields(reader, end, (number, type) => {
    if (number === 1) {
      expect(type, BYTES);
      entries.push(entry(reader));
    } else if (number === 2) {
      // A message field sent twice: the codec keeps the last, whole (it does not merge them).
      expect(type, BYTES);
      limit = override(reader);
    } else if (number === 3) {
      expect(type, BYTES);
      hits = uint64Value(reader);
    } else return false;
    return true;
  });
  return { entries, limit, hits_addend: hits };
}

/**
 * The request as the codec decodes it (defaults included: '' for a missing string, 0 for a
 * number, null for a missing sub-message, [] for a list), or undefined for a message this reader
 * leaves to the codec: a field with an unexpected wire type, a group, a number past its field's
 * range, or bytes that end early. What it returns is what the codec returns for the same bytes.
 */
export function decodeRequest(bytes: Uint8Array): RateLimitRequestMessage | undefined {
  const buffer = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length);
  const reader = new Reader(buffer, 0, buffer.length);
  let domain = '';
  const descriptors: DescriptorMessage[] = [];
  let hits = 0;
  try {
    fields(reader, bytes.length, (number, type) => {
      if (number === 1) {
        expect(type, BYTES);
        domain = reader.string();
      } else if (number === 2) {
        expect(type, BYTES);
        descriptors.push(descriptor(reader));
      } else if (number === 3) {
        expect(type, VARINT);
        hits = reader.uint32();
      } else return false;
      return true;
    });
  } catch (error) {
    if (error instanceof Unusual) return undefined;
    throw error;
  }
  return { descriptors, domain, hits_addend: hits };
}
