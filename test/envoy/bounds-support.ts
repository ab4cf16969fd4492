// The bounds suites' config (a rule for single descriptors, one 32 levels deep) and requests built to a size.
import protobuf from 'protobufjs';
import { PROTO_JSON } from '../../packages/server/src/envoy/proto.generated.js';
import { configDir, type Descriptor, type RateLimitRequest } from '../helpers/envoy/support.js';

/** The depth of the deepest rule: a descriptor of 32 entries (the default bound) must match one. */
const DEPTH = 32;

/** `user` for single descriptors, and `k0 -> k1 -> ... -> k31` for descriptors of many entries. */
function boundsConfig(): string {
  let chain = '';
  for (let level = DEPTH - 1; level >= 0; level--) {
    const indent = '  '.repeat(level * 2);
    const limit =
      level === DEPTH - 1
        ? `\n${indent}    rate_limit:\n${indent}      unit: hour\n${indent}      requests_per_unit: 1000000\n${indent}      timeout: 5s`
        : '';
    chain = `\n${indent}  - key: k${level}${limit}${chain === '' ? '' : `\n${indent}    descriptors:${chain}`}`;
  }
  return `domain: bounds
descriptors:
  - key: user
    rate_limit:
      unit: hour
      requests_per_unit: 1000
      timeout: 5s${chain}
`;
}

export const CONFIG = configDir({ 'bounds.yaml': boundsConfig() });

export function user(value: string, hits?: number): Descriptor {
  return {
    entries: [{ key: 'user', value }],
    ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
  };
}

/** A descriptor of `count` entries down the chain, the last one's value naming whose quota. */
export function deep(count: number, value: string, padding = ''): Descriptor {
  return {
    entries: Array.from({ length: count }, (_, level) => ({
      key: `k${level}`,
      value: level === count - 1 ? `${value}${padding}` : `v${padding}`,
    })),
  };
}

const requestType = protobuf.Root.fromJSON(PROTO_JSON as protobuf.INamespace).lookupType(
  'envoy.service.ratelimit.v3.RateLimitRequest',
);

/** The request's size on the wire, as the server's decoder receives it. */
export function wireBytes(request: RateLimitRequest): number {
  return requestType.encode(requestType.fromObject(request)).finish().length;
}

/** A request of exactly `bytes` on the wire: `user=<name>`, and a descriptor no rule matches padding it to size. */
export function requestOfSize(bytes: number, name: string): RateLimitRequest {
  let padding = bytes - 60;
  for (;;) {
    const pad = { entries: [{ key: 'padding', value: 'x'.repeat(padding) }] };
    const request = { domain: 'bounds', descriptors: [user(name), pad] };
    const size = wireBytes(request);
    if (size === bytes) return request;
    padding += bytes - size;
  }
}

/**
 * The largest request the default bounds take: 64 descriptors of 32 entries, each matching the
 * deep rule with its own quota, their values as long as 64 KiB allows.
 */
export function largestRequest(): RateLimitRequest {
  const made = (padding: number): RateLimitRequest => ({
    domain: 'bounds',
    descriptors: Array.from({ length: 64 }, (_, i) => deep(32, `large-${i}`, 'p'.repeat(padding))),
  });
  let padding = 0;
  while (wireBytes(made(padding + 1)) <= 65_536) padding++;
  return made(padding);
}
