// envoyproxy/ratelimit's example directory started unchanged, and the expectations of its integration scripts
// (integration-test/scripts/*.sh) as the calls its example Envoy (examples/envoy/proxy.yaml) would make.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  awayFromMinuteEnd,
  type Descriptor,
  type EnvoyServe,
  FIXTURES,
  metric,
  OK,
  OVER_LIMIT,
  type RateLimitResponse,
  startEnvoyServe,
  structToJson,
} from '../helpers/envoy/support.js';

const EXAMPLE = join(FIXTURES, 'reference', 'examples', 'ratelimit', 'config');

/** A descriptor from `request_headers` actions: one entry per header, in the action's order. */
function headers(...pairs: [string, string][]): Descriptor {
  return { entries: pairs.map(([key, value]) => ({ key, value })) };
}

function service(name: string, hits?: number): Descriptor {
  return {
    entries: [{ key: 'service', value: name }],
    ...(hits === undefined ? {} : { hits_addend: { value: hits } }),
  };
}

/** One call of the `rl` domain; true when Envoy would let the request through. */
async function passes(serve: EnvoyServe, ...descriptors: Descriptor[]): Promise<boolean> {
  const response = await serve.client.shouldRateLimit({ domain: 'rl', descriptors });
  return response.overall_code === OK;
}

/** The service the example Envoy routes to: the `service_with_quota.name` of the merged metadata. */
function routedTo(response: RateLimitResponse): unknown {
  const metadata = structToJson(response.dynamic_metadata ?? { fields: {} }).metadata as
    | { service_with_quota?: { name?: string } }
    | undefined;
  return metadata?.service_with_quota?.name;
}

describe('the reference’s example directory, started unchanged', () => {
  let serve: EnvoyServe;
  before(async () => {
    await awayFromMinuteEnd(15_000);
    serve = await startEnvoyServe(EXAMPLE, ['--envoy-metadata']);
  });
  after(async () => {
    await serve.stop();
  });

  test('it starts with both domains of the directory', () => {
    assert.match(serve.running.output().stdout, /domains (mongo_cps, rl|rl, mongo_cps) from 2 file\(s\)/);
  });

  test('simple-get.sh: the happy path', async () => {
    assert.ok(await passes(serve, headers(['foo', 'test'], ['baz', 'shady'])));
  });

  test('trigger-ratelimit.sh: (foo: *), (baz: not-so-shady) passes 3 a minute', async () => {
    const twoHeader = headers(['foo', 'pelle'], ['baz', 'not-so-shady']);
    for (let i = 0; i < 3; i++) assert.ok(await passes(serve, twoHeader), `call ${i + 1}`);
    assert.equal(await passes(serve, twoHeader), false);
    assert.equal(await passes(serve, twoHeader), false);
  });

  test('trigger-shadow-mode-key.sh: (foo: *), (baz: shady) in shadow mode never refuses', async () => {
    const shady = headers(['foo', 'pelle'], ['baz', 'shady']);
    for (let i = 0; i < 6; i++) assert.ok(await passes(serve, shady), `call ${i + 1}`);
    const labels = { domain: 'rl', key1: 'foo', key2: 'baz_shady' };
    assert.equal(await metric(serve.http, 'ratelimit_service_rate_limit_shadow_mode_total', labels), 3);
  });

  test('value-included-in-stats-key-when-unspecified.sh: 2 a minute, counted under the value', async () => {
    const unspec = headers(['unspec', 'unspecified_value']);
    assert.ok(await passes(serve, unspec));
    assert.ok(await passes(serve, unspec));
    assert.equal(await passes(serve, unspec), false);
    const labels = { domain: 'rl', key1: 'unspec_unspecified_value' };
    assert.equal(await metric(serve.http, 'ratelimit_service_rate_limit_over_limit_total', labels), 1);
  });

  test('replaces.sh: a replacing limit raises the replaced one and leaves it untouched', async () => {
    const bar = (foo: string, value: string): Descriptor => headers(['foo', foo], ['bar', value]);
    const cluster = (destination: string): Descriptor =>
      headers(['source_cluster', 'proxy'], ['destination_cluster', destination]);
    const category = headers(['category', 'account']);
    // (foo: *), (bar: banned) is 0 a minute; (destination_cluster: override) replaces it with 2.
    assert.equal(await passes(serve, bar('bkthomps', 'banned')), false);
    assert.equal(await passes(serve, bar('bkthomps', 'banned'), cluster('mock')), false);
    const override = [bar('bkthomps', 'banned'), cluster('override')];
    assert.deepEqual(
      [await passes(serve, ...override), await passes(serve, ...override), await passes(serve, ...override)],
      [true, true, false],
    );
    // (bar: bkthomps) is 1 a minute; (destination_cluster: bkthomps) replaces it with 2 a minute.
    const replaced = [bar('my_foo', 'bkthomps'), cluster('bkthomps')];
    assert.deepEqual(
      [await passes(serve, ...replaced), await passes(serve, ...replaced), await passes(serve, ...replaced)],
      [true, true, false],
    );
    const notReplaced = [bar('my_foo', 'bkthomps'), cluster('not_bkthomps')];
    assert.deepEqual(
      [await passes(serve, ...notReplaced), await passes(serve, ...notReplaced)],
      [true, false],
    );
    assert.equal(await passes(serve, ...replaced), false);
    // (category: account) replaces both bkthomps and fake_name, with 4 a minute.
    const five = [bar('my_foo', 'bkthomps'), cluster('fake'), category];
    const fiveCalls: boolean[] = [];
    for (let i = 0; i < 5; i++) fiveCalls.push(await passes(serve, ...five));
    assert.deepEqual(fiveCalls, [true, true, true, true, false]);
    assert.deepEqual(
      [await passes(serve, bar('foo_2', 'bkthomps')), await passes(serve, bar('foo_2', 'bkthomps'))],
      [true, false],
    );
    const fake = [bar('foo_3', 'bar_3'), cluster('fake')];
    assert.deepEqual(
      [await passes(serve, ...fake), await passes(serve, ...fake), await passes(serve, ...fake)],
      [true, true, false],
    );
    assert.equal(await passes(serve, ...five), false);
  });
});

describe('the reference’s quota scripts, each on a fresh service', () => {
  // The scripts share their descriptors: each gets its own service, all started at once.
  let services: EnvoyServe[] = [];
  before(async () => {
    await awayFromMinuteEnd(15_000);
    services = await Promise.all([1, 2, 3].map(() => startEnvoyServe(EXAMPLE, ['--envoy-metadata'])));
  });
  after(async () => {
    await Promise.all(services.map((serve) => serve.stop()));
  });

  test('quota.sh: two quota-mode descriptors pass while one is over, and are refused when both are', async () => {
    const serve = services[0] as EnvoyServe;
    const both = [service('service_1'), service('service_2')];
    const first = await serve.client.shouldRateLimit({ domain: 'rl', descriptors: both });
    assert.equal(first.overall_code, OK);
    assert.deepEqual(structToJson(first.dynamic_metadata ?? { fields: {} }), {
      domain: 'rl',
      descriptors: [{ entries: ['service=service_1'] }, { entries: ['service=service_2'] }],
      // Both passed: their maps merge key by key, the first descriptor's value kept.
      metadata: { service_with_quota: { name: 'service_1' } },
    });
    const second = await serve.client.shouldRateLimit({ domain: 'rl', descriptors: both });
    assert.equal(second.overall_code, OK);
    assert.deepEqual(
      second.statuses.map((status) => [status.code, status.limit_remaining]),
      [
        [OVER_LIMIT, 0],
        [OK, 0],
      ],
    );
    assert.equal(routedTo(second), 'service_2');
    const third = await serve.client.shouldRateLimit({ domain: 'rl', descriptors: both });
    assert.equal(third.overall_code, OVER_LIMIT);
    assert.equal(structToJson(third.dynamic_metadata ?? { fields: {} }).metadata, undefined);
  });

  test('token-quota.sh: checked with 0 hits, debited after the response: the quota of 2 admits 2', async () => {
    const serve = services[1] as EnvoyServe;
    const admitted: boolean[] = [];
    for (let i = 0; i < 4; i++) {
      const ok = await passes(serve, service('service_2', 0));
      admitted.push(ok);
      // Envoy's apply_on_stream_done: the hit is sent once the response is done; its answer is not enforced.
      if (ok) await passes(serve, service('service_2', 1));
    }
    // The reference admits 3: its response-path hit on a full counter pushes it past the limit,
    // and only then is the check over. A refusal takes nothing here, so the check is over when
    // nothing is left.
    assert.deepEqual(admitted, [true, true, false, false]);
  });

  test('multiservice-tokenquota.sh: routed by metadata to service 1, then 2, then refused', async () => {
    const serve = services[2] as EnvoyServe;
    const served: unknown[] = [];
    for (let i = 0; i < 5; i++) {
      const check = await serve.client.shouldRateLimit({
        domain: 'rl',
        descriptors: [service('service_1', 0), service('service_2', 0)],
      });
      if (check.overall_code !== OK) {
        served.push('refused');
        continue;
      }
      const name = routedTo(check);
      served.push(name);
      await passes(serve, service(name as string, 1));
    }
    // The quotas are 1 and 2 a minute: 3 requests (the reference's counters let each one more through).
    assert.deepEqual(served, ['service_1', 'service_2', 'service_2', 'refused', 'refused']);
  });
});
