// The bounds of one ShouldRateLimit call, over gRPC and POST /json: a request at each bound is decided, one just past
// it is refused at once with a message naming the bound and its flag, counted, and takes nothing.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { runCli } from '../helpers/cli.js';
import {
  type Descriptor,
  type EnvoyServe,
  HOUR_MS,
  httpCall,
  metric,
  OK,
  type RateLimitRequest,
  ROOT,
  startEnvoyServe,
} from '../helpers/envoy/support.js';
import { clearOfWindowEnd } from '../helpers/window.js';
import { CONFIG, deep, requestOfSize, user } from './bounds-support.js';

// Counts are read within one fixed window: no test starts in the last seconds of an hour's.
beforeEach(() => clearOfWindowEnd(HOUR_MS, 10_000));

const REFUSALS = 'ratelimit_service_should_rate_limit_error_total';

describe('the bounds of one call, at their defaults', () => {
  let serve: EnvoyServe;
  const refusals = (): Promise<number> => metric(serve.http, REFUSALS, { err_type: 'service_error' });
  const left = async (...descriptors: Descriptor[]): Promise<number[]> => {
    const look = descriptors.map((descriptor) => ({ ...descriptor, hits_addend: { value: 0 } }));
    const response = await serve.client.shouldRateLimit({ domain: 'bounds', descriptors: look });
    return response.statuses.map((s) => s.limit_remaining);
  };
  const json = (request: RateLimitRequest, pad = 0): string => {
    const text = JSON.stringify(request);
    return `${text.slice(0, -1)}${' '.repeat(pad)}}`;
  };
  before(async () => {
    serve = await startEnvoyServe(CONFIG);
  });
  after(async () => {
    await serve.stop();
  });

  test('64 descriptors are decided; 65 are refused, counted, and take nothing', async () => {
    const many = (count: number, prefix: string): RateLimitRequest => ({
      domain: 'bounds',
      descriptors: Array.from({ length: count }, (_, i) => user(`${prefix}${i}`)),
    });
    const decided = await serve.client.shouldRateLimit(many(64, 'd'));
    assert.equal(decided.overall_code, OK);
    assert.ok(decided.statuses.every((s) => s.limit_remaining === 999));
    const before = await refusals();
    await assert.rejects(serve.client.shouldRateLimit(many(65, 'd')), {
      code: status.INVALID_ARGUMENT,
      details:
        'rate limit descriptor list has 65 descriptors; at most 64 are taken (--envoy-max-descriptors)',
    });
    const overHttp = await httpCall(`${serve.http}/json`, 'POST', JSON.stringify(many(65, 'd')));
    assert.equal(overHttp.status, 400);
    assert.match(
      JSON.parse(overHttp.body).error,
      /has 65 descriptors; at most 64 are taken \(--envoy-max-descriptors\)$/,
    );
    assert.equal(await refusals(), before + 2);
    assert.deepEqual(await left(user('d0'), user('d63'), user('d64')), [999, 999, 1000]);
    assert.equal((await httpCall(`${serve.http}/json`, 'POST', JSON.stringify(many(64, 'h')))).status, 200);
  });

  test('a descriptor of 32 entries is decided; of 33, refused, counted, and nothing taken', async () => {
    const decided = await serve.client.shouldRateLimit({ domain: 'bounds', descriptors: [deep(32, 'e')] });
    assert.equal(decided.statuses[0]?.limit_remaining, 999_999);
    const before = await refusals();
    const over = { domain: 'bounds', descriptors: [user('e'), deep(33, 'e')] };
    await assert.rejects(serve.client.shouldRateLimit(over), {
      code: status.INVALID_ARGUMENT,
      details: 'descriptor 1 has 33 entries; at most 32 are taken (--envoy-max-entries)',
    });
    const overHttp = await httpCall(`${serve.http}/json`, 'POST', JSON.stringify(over));
    assert.equal(overHttp.status, 400);
    assert.match(JSON.parse(overHttp.body).error, /descriptor 1 has 33 entries; at most 32 are taken/);
    assert.equal(await refusals(), before + 2);
    assert.deepEqual(await left(user('e'), deep(32, 'e')), [1000, 999_999]);
  });

  test('a request of 65536 bytes is decided; of 65537, refused before it is decoded, counted, nothing taken', async () => {
    const atBound = requestOfSize(65_536, 's-at');
    assert.equal((await serve.client.shouldRateLimit(atBound)).overall_code, OK);
    const before = await refusals();
    const past = requestOfSize(65_537, 's-past');
    await assert.rejects(serve.client.shouldRateLimit(past), {
      code: status.INVALID_ARGUMENT,
      details: 'the request is 65537 bytes; at most 65536 are taken (--envoy-max-message-bytes)',
    });
    assert.equal(await refusals(), before + 1);
    assert.deepEqual(await left(user('s-at'), user('s-past')), [999, 1000]);
  });

  test('a POST /json body of 65536 bytes is decided; of 65537, refused, counted, nothing taken', async () => {
    const request = { domain: 'bounds', descriptors: [user('j-at')] };
    const atBound = json(request, 65_536 - json(request).length);
    assert.equal(Buffer.byteLength(atBound), 65_536);
    assert.equal((await httpCall(`${serve.http}/json`, 'POST', atBound)).status, 200);
    const before = await refusals();
    const pastRequest = { domain: 'bounds', descriptors: [user('j-past')] };
    const past = json(pastRequest, 65_537 - json(pastRequest).length);
    const refused = await httpCall(`${serve.http}/json`, 'POST', past);
    assert.deepEqual(
      [refused.status, JSON.parse(refused.body).error],
      [400, 'the request is 65537 bytes; at most 65536 are taken (--envoy-max-message-bytes)'],
    );
    assert.equal(await refusals(), before + 1);
    assert.deepEqual(await left(user('j-at'), user('j-past')), [999, 1000]);
  });
});

describe('the bounds follow their flags', () => {
  let serve: EnvoyServe;
  before(async () => {
    serve = await startEnvoyServe(CONFIG, [
      '--envoy-max-descriptors',
      '2',
      '--envoy-max-entries',
      '1',
      '--envoy-max-message-bytes',
      '200',
    ]);
  });
  after(async () => {
    await serve.stop();
  });

  test('each refusal names the bound given', async () => {
    await assert.rejects(
      serve.client.shouldRateLimit({ domain: 'bounds', descriptors: [user('a'), user('b'), user('c')] }),
      {
        details:
          'rate limit descriptor list has 3 descriptors; at most 2 are taken (--envoy-max-descriptors)',
      },
    );
    await assert.rejects(serve.client.shouldRateLimit({ domain: 'bounds', descriptors: [deep(2, 'f')] }), {
      details: 'descriptor 0 has 2 entries; at most 1 are taken (--envoy-max-entries)',
    });
    await assert.rejects(serve.client.shouldRateLimit(requestOfSize(201, 'g')), {
      details: 'the request is 201 bytes; at most 200 are taken (--envoy-max-message-bytes)',
    });
    assert.equal((await serve.client.shouldRateLimit(requestOfSize(200, 'g'))).overall_code, OK);
  });

  test('a bound past its maximum is refused at start', async () => {
    const result = await runCli(
      ['serve', '--port', '0', '--grpc-port', '0', '--envoy', CONFIG, '--envoy-max-descriptors', '65'],
      { cwd: ROOT },
    );
    assert.equal(result.code, 2);
    assert.match(
      result.stderr,
      /Expected `--envoy-max-descriptors` to be a whole number from 1 to 64, got "65"\./,
    );
  });
});
