// The service reads RateLimitRequest itself (envoy/request-codec.ts): the object it makes of a message is the one the
// proto loader's codec makes of the same bytes, for requests drawn at random and for those bytes cut and changed at
// random; what it leaves (undefined) the codec reads, so the service's answer to any bytes is the codec's.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadServices } from '../../packages/server/src/envoy/grpc.js';
import type { RateLimitRequestMessage } from '../../packages/server/src/envoy/messages.js';
import { decodeRequest } from '../../packages/server/src/envoy/request-codec.js';

const method = loadServices().shouldRateLimit;

/** A seeded generator (mulberry32): the same requests on every run. */
function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const TEXTS = ['', 'remote_address', '10.0.0.1', 'é', '🦀 tenant', 'k'.repeat(200), 'generic_key'];
const NUMBERS = [0, 1, 127, 128, 16_384, 2 ** 31 - 1, 2 ** 32 - 1];

function draw(next: () => number): Record<string, unknown> {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  const request: Record<string, unknown> = {};
  if (next() < 0.9) request.domain = pick(TEXTS);
  if (next() < 0.3) request.hits_addend = pick(NUMBERS);
  request.descriptors = Array.from({ length: Math.floor(next() * 4) }, () => {
    const descriptor: Record<string, unknown> = {
      entries: Array.from({ length: Math.floor(next() * 4) }, () => ({
        key: pick(TEXTS),
        value: pick(TEXTS),
      })),
    };
    if (next() < 0.3) descriptor.limit = { requests_per_unit: pick(NUMBERS), unit: Math.floor(next() * 8) };
    if (next() < 0.3) descriptor.hits_addend = { value: pick([...NUMBERS, 2 ** 40]) };
    return descriptor;
  });
  return request;
}

/** What the codec makes of bytes: its object, or 'throws'. */
function viaCodec(bytes: Buffer): RateLimitRequestMessage | 'throws' {
  try {
    return method.requestDeserialize(bytes);
  } catch {
    return 'throws';
  }
}

describe("RateLimitRequest read by the service's own reader", () => {
  test('the same object as the codec for 5,000 requests drawn at random', () => {
    const next = random(33);
    for (let i = 0; i < 5000; i++) {
      const bytes = Buffer.from(method.requestSerialize(draw(next) as never));
      const read = decodeRequest(bytes);
      assert.ok(read !== undefined, bytes.toString('hex'));
      assert.deepEqual(read, viaCodec(bytes), bytes.toString('hex'));
    }
  });

  test('for bytes cut or changed at random, whatever it reads is what the codec reads, and it never throws', () => {
    const next = random(34);
    let read = 0;
    let left = 0;
    for (let i = 0; i < 20_000; i++) {
      const bytes = Buffer.from(method.requestSerialize(draw(next) as never));
      if (bytes.length === 0) continue;
      const changed =
        next() < 0.5 ? bytes.subarray(0, Math.floor(next() * bytes.length)) : Buffer.from(bytes);
      if (changed === bytes || changed.length === bytes.length) {
        for (let j = 0; j < 1 + Math.floor(next() * 3); j++) {
          changed[Math.floor(next() * changed.length)] = Math.floor(next() * 256);
        }
      }
      const mine = decodeRequest(changed);
      if (mine === undefined) {
        left++;
        continue;
      }
      read++;
      assert.deepEqual(mine, viaCodec(changed), changed.toString('hex'));
    }
    // Both kinds occur: the comparison above is not empty, nor is the codec never asked.
    assert.ok(read > 1000 && left > 1000, `read ${read}, left ${left}`);
  });

  test('a field with another wire type, or a number past its range, is left to the codec', () => {
    // domain (1) as a varint; hits_addend (3) past 32 bits; a group (wire type 3).
    for (const hex of ['0801', '1880808080808001', '0b0c']) {
      assert.equal(decodeRequest(Buffer.from(hex, 'hex')), undefined, hex);
    }
  });
});
