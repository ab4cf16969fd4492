// The service writes RateLimitResponse itself (envoy/response-codec.ts): the same bytes, frame included, as the proto
// loader's codec gives for the same message, over responses drawn at random within each field's range and at its
// edges; the responses it leaves to the codec (a body, metadata, a number outside a field's range) are left.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadServices } from '../../packages/server/src/envoy/grpc.js';
import { frame } from '../../packages/server/src/envoy/grpc-wire.js';
import type {
  DescriptorStatusMessage,
  HeaderValueMessage,
  RateLimitResponseMessage,
} from '../../packages/server/src/envoy/messages.js';
import { toWire } from '../../packages/server/src/envoy/messages.js';
import { framedResponse } from '../../packages/server/src/envoy/response-codec.js';

const method = loadServices().shouldRateLimit;

/** The codec's frame for a response: what the service sent before it wrote responses itself. */
const viaCodec = (response: RateLimitResponseMessage): Buffer =>
  frame(method.responseSerialize(toWire(response)));

/** A seeded generator (mulberry32): the same responses on every run. */
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

const EDGES = [0, 1, 127, 128, 16_383, 16_384, 2 ** 21, 2 ** 28, 2 ** 31 - 1, 2 ** 32 - 1];
const TEXTS = ['', 'a', 'tenant_per_second', 'é', '🦀 x', 'k'.repeat(130), 'x-ratelimit-limit'];

function draw(next: () => number): RateLimitResponseMessage {
  const pick = <T>(values: readonly T[]): T => values[Math.floor(next() * values.length)] as T;
  const uint32 = (): number => (next() < 0.5 ? pick(EDGES) : Math.floor(next() * 2 ** 32));
  const headers = (): HeaderValueMessage[] =>
    Array.from({ length: Math.floor(next() * 3) }, () => ({ key: pick(TEXTS), value: pick(TEXTS) }));
  const statuses: DescriptorStatusMessage[] = Array.from({ length: Math.floor(next() * 4) }, () => ({
    code: pick([0, 1, 2]),
    current_limit:
      next() < 0.3 ? null : { name: pick(TEXTS), requests_per_unit: uint32(), unit: Math.floor(next() * 8) },
    limit_remaining: uint32(),
    duration_until_reset:
      next() < 0.3
        ? null
        : {
            seconds: next() < 0.2 ? pick([0, 2 ** 40, Number.MAX_SAFE_INTEGER]) : Math.floor(next() * 86_400),
            nanos: next() < 0.2 ? pick([0, 999_999_999]) : Math.floor(next() * 1e9),
          },
  }));
  return {
    overall_code: pick([0, 1, 2]),
    statuses,
    response_headers_to_add: headers(),
    request_headers_to_add: headers(),
  };
}

describe("RateLimitResponse written by the service's own writer", () => {
  test('the same bytes as the codec for 5,000 responses drawn at random, and for the edges of each field', () => {
    const next = random(33);
    const responses: RateLimitResponseMessage[] = [
      { overall_code: 0, statuses: [], response_headers_to_add: [], request_headers_to_add: [] },
      ...Array.from({ length: 5000 }, () => draw(next)),
    ];
    for (const response of responses) {
      const written = framedResponse(response);
      assert.ok(written !== undefined, JSON.stringify(response));
      assert.deepEqual(written, viaCodec(response), JSON.stringify(response));
    }
  });

  test('a response with a body or metadata, or a number outside its field, is left to the codec', () => {
    const base: RateLimitResponseMessage = {
      overall_code: 2,
      statuses: [],
      response_headers_to_add: [],
      request_headers_to_add: [],
    };
    const status: DescriptorStatusMessage = {
      code: 2,
      current_limit: { name: '', requests_per_unit: 10, unit: 1 },
      limit_remaining: 0,
      duration_until_reset: { seconds: 1, nanos: 0 },
    };
    const left: RateLimitResponseMessage[] = [
      { ...base, raw_body: Buffer.from('slow down') },
      { ...base, dynamic_metadata: { tenant: 'a' } },
      { ...base, overall_code: -1 },
      { ...base, statuses: [{ ...status, limit_remaining: 2 ** 32 }] },
      { ...base, statuses: [{ ...status, limit_remaining: 1.5 }] },
      { ...base, statuses: [{ ...status, duration_until_reset: { seconds: -1, nanos: 0 } }] },
      { ...base, statuses: [{ ...status, current_limit: { name: 'x', requests_per_unit: -3, unit: 1 } }] },
    ];
    for (const response of left) assert.equal(framedResponse(response), undefined, JSON.stringify(response));
  });
});
