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
  /** The wire type of the field `field` last read. */
  type = 0;
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

  /**
   * The next field's number before `end` (its wire type in `type`), or 0 once the message has ended,
   * which must be exactly at `end`. The readers below loop over their fields with it, skipping the
   * numbers they do not know: no closure per message.
   */
  field(end: number): number {
    if (this.at >= end) {
      if (this.at !== end) throw UNUSUAL;
      return 0;
    }
    const key = this.key();
    const number = key >>> 3;
    if (number === 0) throw UNUSUAL;
    this.type = key & 7;
    return number;
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

/**
 * The list being read, copied out at its length: a list grown by pushing reserves 17 places on its
 * first push, which most requests' one descriptor and one entry would leave unused.
 */
function exactly<T>(scratch: T[], from: number): T[] {
  const list = scratch.slice(from);
  scratch.length = from;
  return list;
}

/** Where entries and descriptors are gathered while read (a request is read at once, never two together). */
const ENTRIES: Entry[] = [];
const DESCRIPTORS: DescriptorMessage[] = [];

/** Requires a known field's wire type: the codec would read a mismatched one its own way. */
function expect(type: number, wanted: number): void {
  if (type !== wanted) throw UNUSUAL;
}

function entry(reader: Reader): Entry {
  const end = reader.delimited();
  let key = '';
  let value = '';
  for (let number = reader.field(end); number !== 0; number = reader.field(end)) {
    if (number === 1) {
      expect(reader.type, BYTES);
      key = reader.string();
    } else if (number === 2) {
      expect(reader.type, BYTES);
      value = reader.string();
    } else reader.skip(reader.type);
  }
  return { key, value };
}

function override(reader: Reader): { requests_per_unit: number; unit: number } {
  const end = reader.delimited();
  let requests = 0;
  let unit = 0;
  for (let number = reader.field(end); number !== 0; number = reader.field(end)) {
    if (number === 1) {
      expect(reader.type, VARINT);
      requests = reader.uint32();
    } else if (number === 2) {
      expect(reader.type, VARINT);
      unit = reader.enum();
    } else reader.skip(reader.type);
  }
  return { requests_per_unit: requests, unit };
}

/** google.protobuf.UInt64Value, its value a number (the codec's `longs: Number`). */
function uint64Value(reader: Reader): { value: number } {
  const end = reader.delimited();
  let value = 0;
  for (let number = reader.field(end); number !== 0; number = reader.field(end)) {
    if (number === 1) {
      expect(reader.type, VARINT);
      value = reader.varint();
    } else reader.skip(reader.type);
  }
  return { value };
}

function descriptor(reader: Reader): DescriptorMessage {
  const end = reader.delimited();
  const from = ENTRIES.length;
  let limit: DescriptorMessage['limit'] = null;
  let hits: DescriptorMessage['hits_addend'] = null;
  for (let number = reader.field(end); number !== 0; number = reader.field(end)) {
    if (number === 1) {
      expect(reader.type, BYTES);
      ENTRIES.push(entry(reader));
    } else if (number === 2) {
      // A message field sent twice: the codec keeps the last, whole (it does not merge them).
      expect(reader.type, BYTES);
      limit = override(reader);
    } else if (number === 3) {
      expect(reader.type, BYTES);
      hits = uint64Value(reader);
    } else reader.skip(reader.type);
  }
  return { entries: exactly(ENTRIES, from), limit, hits_addend: hits };
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
  let hits = 0;
  // Left by a read that stopped part way (an unusual message): start empty.
  ENTRIES.length = 0;
  DESCRIPTORS.length = 0;
  try {
    for (let number = reader.field(bytes.length); number !== 0; number = reader.field(bytes.length)) {
      if (number === 1) {
        expect(reader.type, BYTES);
        domain = reader.string();
      } else if (number === 2) {
        expect(reader.type, BYTES);
        DESCRIPTORS.push(descriptor(reader));
      } else if (number === 3) {
        expect(reader.type, VARINT);
        hits = reader.uint32();
      } else reader.skip(reader.type);
    }
  } catch (error) {
    ENTRIES.length = 0;
    DESCRIPTORS.length = 0;
    if (error instanceof Unusual) return undefined;
    throw error;
  }
  return { descriptors: exactly(DESCRIPTORS, 0), domain, hits_addend: hits };
}
