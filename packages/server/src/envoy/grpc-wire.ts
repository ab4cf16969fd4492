// gRPC's framing over HTTP/2, as far as a unary and a server-streaming service need it: the 5-byte message prefix, the
// status trailers, the grpc-timeout header. https://github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md has the rules.

/** The gRPC status codes the service answers with. */
export const STATUS = {
  OK: 0,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** The prefix of every message: a compressed flag and the length, big-endian. */
export const PREFIX_BYTES = 5;

/** One message framed: its prefix and its bytes, in one buffer (one write, one DATA frame when small). */
export function frame(message: Uint8Array): Buffer {
  const framed = Buffer.allocUnsafe(PREFIX_BYTES + message.length);
  framed[0] = 0;
  framed.writeUInt32BE(message.length, 1);
  framed.set(message, PREFIX_BYTES);
  return framed;
}

/** What a request body held: its one message, or why it cannot be read. */
export type Unframed =
  | { readonly message: Buffer }
  | { readonly code: number; readonly details: string }
  | { readonly oversized: number };

/**
 * The one message of a unary request's body. A compressed message is refused (the service announces
 * `identity` only, so a client that compresses ignored it); a message past `maxBytes` is reported by
 * its size, not read. `received` is the body's length even when the bytes past the bound were dropped.
 */
export function unframe(chunks: readonly Buffer[], received: number, maxBytes: number): Unframed {
  const body = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks);
  if (received < PREFIX_BYTES) return { code: STATUS.INTERNAL, details: 'no request message' };
  if (body[0] !== 0) {
    return {
      code: STATUS.UNIMPLEMENTED,
      details: 'compressed messages are not accepted (grpc-accept-encoding: identity)',
    };
  }
  const length = body.readUInt32BE(1);
  if (length > maxBytes) return { oversized: length };
  if (received !== PREFIX_BYTES + length) {
    return received < PREFIX_BYTES + length
      ? { code: STATUS.INTERNAL, details: 'the request message was cut short' }
      : { code: STATUS.UNIMPLEMENTED, details: 'a unary call takes one request message' };
  }
  return { message: body.subarray(PREFIX_BYTES, PREFIX_BYTES + length) };
}

/**
 * grpc-message is percent-encoded: bytes outside printable ASCII, and '%' itself. Most messages are
 * plain ASCII and go through unchanged.
 */
export function encodeMessage(details: string): string {
  if (!/[^\x20-\x24\x26-\x7e]/.test(details)) return details;
  let out = '';
  for (const byte of Buffer.from(details, 'utf8')) {
    out +=
      byte >= 0x20 && byte <= 0x7e && byte !== 0x25
        ? String.fromCharCode(byte)
        : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

const TIMEOUT_UNITS_MS: Readonly<Record<string, number>> = {
  H: 3_600_000,
  M: 60_000,
  S: 1000,
  m: 1,
  u: 0.001,
  n: 0.000_001,
};

/** A call's grpc-timeout (up to 8 digits and a unit) in ms; undefined when absent or not one. */
export function deadlineMs(header: string | string[] | undefined): number | undefined {
  if (typeof header !== 'string') return undefined;
  const match = /^(\d{1,8})([HMSmun])$/.exec(header);
  if (match === null) return undefined;
  return Number(match[1]) * (TIMEOUT_UNITS_MS[match[2] as string] as number);
}
