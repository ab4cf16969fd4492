// `sluice serve --envoy`'s whole /metrics page, after real traffic (gRPC decisions within and over a limit, a bad
// request, POST /v1/limit on the config's policies): every counter family's name ends in `_total`, checked here in
// JavaScript, and, where promtool is installed (Debian's prometheus package), `promtool check metrics` accepts the page
// with nothing to say.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  type EnvoyServe,
  FIXTURES,
  HOUR_MS,
  httpCall,
  OVER_LIMIT,
  startEnvoyServe,
} from '../helpers/envoy/support.js';
import { clearOfWindowEnd } from '../helpers/window.js';

/** Each family's `# TYPE` on a page in Prometheus's text format: name -> type. */
function familyTypes(page: string): Map<string, string> {
  const types = new Map<string, string>();
  for (const match of page.matchAll(/^# TYPE (\S+) (\S+)$/gm))
    types.set(match[1] as string, match[2] as string);
  return types;
}

/** Whether promtool is installed: `promtool --version` runs. */
function hasPromtool(): boolean {
  return spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
}

describe('the /metrics page of sluice serve --envoy', () => {
  let serve: EnvoyServe;
  let page = '';
  before(async () => {
    serve = await startEnvoyServe(join(FIXTURES, 'limits.yaml'));
    // The three calls below count in one hour's window.
    await clearOfWindowEnd(HOUR_MS, 10_000);
    const value = `page-${Date.now()}`;
    const ask = () =>
      serve.client.shouldRateLimit({
        domain: 'limits',
        descriptors: [{ entries: [{ key: 'tenant', value }] }],
      });
    // A limit of 2 an hour: two within, one over.
    const answers = [await ask(), await ask(), await ask()];
    assert.equal(answers[2]?.overall_code, OVER_LIMIT);
    // A request without a domain is refused: a service_error.
    await assert.rejects(serve.client.shouldRateLimit({ domain: '', descriptors: [] }));
    // The config's own policies, over HTTP.
    const limited = await httpCall(
      `${serve.http}/v1/limit`,
      'POST',
      JSON.stringify({ policy: 'api', key: value }),
    );
    assert.equal(limited.status, 200, limited.body);
    page = (await httpCall(`${serve.http}/metrics`)).body;
  });
  after(async () => {
    await serve.stop();
  });

  test('every counter family ends in _total, the Envoy counters included', () => {
    const types = familyTypes(page);
    const counters = [...types].filter(([, type]) => type === 'counter').map(([name]) => name);
    assert.deepEqual(
      counters.filter((name) => !name.endsWith('_total')),
      [],
      'counters named without _total',
    );
    // Not a page without counters: the Envoy ones and the library's are there, with the traffic above.
    for (const name of [
      'ratelimit_service_rate_limit_total_hits_total',
      'ratelimit_service_rate_limit_within_limit_total',
      'ratelimit_service_rate_limit_over_limit_total',
      'ratelimit_service_should_rate_limit_error_total',
      'ratelimit_service_total_requests_total',
      'ratelimit_service_config_load_success_total',
      'sluice_decisions_total',
    ]) {
      assert.equal(types.get(name), 'counter', `${name} on the page`);
    }
    assert.match(page, /^ratelimit_service_rate_limit_over_limit_total\{[^}]*key1="tenant"[^}]*\} 1$/m);
    assert.match(page, /^ratelimit_service_should_rate_limit_error_total\{err_type="service_error"\} 1$/m);
    // And no other family's name ends in _total: promtool reads that as a counter's.
    assert.deepEqual(
      [...types].filter(([name, type]) => type !== 'counter' && name.endsWith('_total')),
      [],
      'non-counters named _total',
    );
  });

  test('promtool check metrics accepts the page, with nothing to say (where promtool is installed)', (t) => {
    if (!hasPromtool()) {
      t.skip('promtool is not installed (apt-get install prometheus)');
      return;
    }
    const promtool = spawnSync('promtool', ['check', 'metrics'], { input: page, encoding: 'utf8' });
    const said = `${promtool.stdout}${promtool.stderr}`.trim();
    assert.equal(promtool.status, 0, said);
    assert.equal(said, '');
  });
});
