// The dashboard of `sluice serve --redis` in a real browser: decisions on the chart, the hammered identifier
// on top, Redis killed shown as down and restarted shown as up, no console error; the overload guard's panel with
// its limit and the refusals it made; screenshots kept.
import assert from 'node:assert/strict';
import { request } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { artifactsDir, type Browser, launchBrowser } from '../helpers/browser.js';
import { type RunningCli, startServe, writeConfig } from '../helpers/cli.js';
import { type RedisServer, startRedis } from '../helpers/redis-server.js';

/**
 * How long the page may take to show what happened: it polls every second, and a loaded machine
 * (a browser, the service and Redis on two shared cores) can be several polls late. Waits end as
 * soon as the page shows it.
 */
const SHOWN_WITHIN_MS = 10_000;

async function decide(base: string, policy: string, key: string): Promise<number> {
  const response = await fetch(`${base}/v1/limit`, { method: 'POST', body: JSON.stringify({ policy, key }) });
  await response.text();
  return response.status;
}

/** One POST /v1/limit on a connection of its own; its status. */
function decideAlone(base: string, key: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const outgoing = request(`${base}/v1/limit`, { method: 'POST', agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    outgoing.on('error', reject);
    outgoing.end(JSON.stringify({ policy: 'api', key }));
  });
}

/** A client that keeps deciding (the service learns of an outage from the calls that fail). */
function steadyClient(base: string): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      await Promise.all([decide(base, 'api', 'steady'), decide(base, 'login', 'steady')]);
      await sleep(100);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
    },
  };
}

describe('the dashboard in chromium', () => {
  let redis: RedisServer;
  let serve: RunningCli;
  let base: string;
  let browser: Browser;
  let config: ReturnType<typeof writeConfig>;
  const shots = artifactsDir('dashboard');

  before(async () => {
    redis = await startRedis();
    config = writeConfig({
      policies: {
        api: { algorithm: 'tokenBucket', capacity: 1000, refillPerSecond: 100 },
        login: { algorithm: 'slidingLog', limit: 3, windowMs: 60_000, onStoreError: 'deny' },
      },
    });
    ({ running: serve, base } = await startServe(['--config', config.path, '--redis', redis.url]));
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    serve?.child.kill('SIGTERM');
    await serve?.exited;
    await redis?.stop();
    config?.remove();
  });

  test('shows decisions, the most denied identifier, and Redis going down and coming back, without a console error', async (t) => {
    const page = await browser.page({ width: 1280, height: 900 });
    await page.goto(`${base}/`);
    await page.waitForSelector('[data-policy="api"] .chart path.series.allowed', { state: 'attached' });
    await page.waitForSelector('#connection[data-state="live"]');
    assert.equal(await page.title(), 'sluice');

    // Decisions a client makes are on the chart within the poll.
    for (let i = 0; i < 25; i++) assert.equal(await decide(base, 'api', `client-${i % 5}`), 200);
    await page.waitForSelector('[data-policy="api"] .chart[data-allowed="25"]', { timeout: SHOWN_WITHIN_MS });
    // The line rises above the zero line (the first grid line): some point of the path is higher.
    // (Not "higher than its first point": a service a second old has one point, and it holds them all.)
    const rises = (): Promise<boolean> =>
      page.$eval('[data-policy="api"] .chart', (chart) => {
        const zero = Number(chart.querySelector('line.grid')?.getAttribute('y1'));
        const d = chart.querySelector('path.series.allowed')?.getAttribute('d') ?? '';
        const ys = [...d.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
        return Number.isFinite(zero) && ys.some((y) => y < zero);
      });
    const until = Date.now() + SHOWN_WITHIN_MS;
    while (!(await rises()) && Date.now() < until) await sleep(100);
    assert.ok(await rises(), 'the allowed line rises above zero');

    // One identifier hammered on login (limit 3) leads its most-denied list.
    for (let i = 0; i < 12; i++) await decide(base, 'login', 'mallory@example.com');
    for (let i = 0; i < 5; i++) await decide(base, 'login', 'bob@example.com');
    await page.waitForSelector(
      '[data-policy="login"] .top-denied li:first-child .identifier:text-is("mallory@example.com")',
      { timeout: SHOWN_WITHIN_MS },
    );
    assert.match(
      (await page.textContent('[data-policy="login"] .top-denied li:first-child .count')) ?? '',
      /^9$/,
    );
    assert.equal(await page.getAttribute('[data-policy="api"] .store-state', 'data-up'), 'true');
    await page.screenshot({ path: join(shots, 'desktop.png'), fullPage: true });

    // Redis killed while a client keeps deciding: the store shows down, the failure policy is named.
    const client = steadyClient(base);
    try {
      await sleep(300);
      await redis.kill('SIGKILL');
      await page.waitForSelector('[data-policy="api"] .store-state[data-up="false"]', {
        timeout: SHOWN_WITHIN_MS,
      });
      await page.waitForSelector('[data-policy="login"] .store-state[data-up="false"]', {
        timeout: SHOWN_WITHIN_MS,
      });
      assert.match((await page.textContent('[data-policy="api"] .store-state')) ?? '', /^store down since /);
      assert.match((await page.textContent('[data-policy="login"] .failure')) ?? '', /^Now it fails closed/);
      await page.screenshot({ path: join(shots, 'desktop-redis-down.png'), fullPage: true });

      // Restarted, it is up again once the service's client has reconnected (its backoff is up to 2 s).
      await redis.restart();
      await page.waitForSelector('[data-policy="api"] .store-state[data-up="true"]', { timeout: 10_000 });
      await page.waitForSelector('[data-policy="login"] .store-state[data-up="true"]', { timeout: 10_000 });
    } finally {
      await client.stop();
    }

    const phone = await browser.page({ width: 390, height: 844 }, 2);
    await phone.goto(`${base}/`);
    await phone.waitForSelector('#connection[data-state="live"]');
    await phone.screenshot({ path: join(shots, 'phone.png') });
    t.diagnostic(`screenshots in ${shots}`);
    console.log(`dashboard screenshots: ${shots}`);
    assert.deepEqual(browser.errors, []);
  });
  test('shows the overload guard: its limit, and the calls it refused, on the chart and in the totals', async () => {
    // A guard held at 2 in flight with no wait, so that concurrent calls on Redis are refused in part.
    const tight = await startServe([
      '--config',
      config.path,
      '--redis',
      redis.url,
      '--shed-limit',
      '2',
      '--shed-min',
      '1',
      '--shed-max',
      '2',
      '--shed-queue',
      '0',
    ]);
    try {
      const page = await browser.page({ width: 1280, height: 900 });
      await page.goto(`${tight.base}/`);
      await page.waitForSelector('#guard-limit-chart[data-limit="2"]', { timeout: SHOWN_WITHIN_MS });
      assert.equal(await page.isVisible('#guard'), true);
      assert.equal(await page.textContent('#guard-limit'), '2');

      const statuses = await Promise.all(
        Array.from({ length: 200 }, (_, i) => decideAlone(tight.base, `burst-${i % 7}`)),
      );
      const refused = statuses.filter((status) => status === 503).length;
      assert.ok(refused > 0, 'some of 200 concurrent calls past a limit of 2 are refused');
      // The panel counts exactly the refusals the clients saw: on the chart and in the total.
      await page.waitForSelector(`#guard-refused-chart[data-refused="${refused}"]`, {
        timeout: SHOWN_WITHIN_MS,
      });
      assert.equal(await page.textContent('#guard-refused-total'), refused.toLocaleString('en-US'));
      const rises = await page.$eval('#guard-refused-chart', (chart) => {
        const zero = Number(chart.querySelector('line.grid')?.getAttribute('y1'));
        const d = chart.querySelector('path.series.denied')?.getAttribute('d') ?? '';
        const ys = [...d.matchAll(/[ML][\d.]+,([\d.]+)/g)].map((m) => Number(m[1]));
        return Number.isFinite(zero) && ys.some((y) => y < zero);
      });
      assert.ok(rises, 'the refusals line rises above zero');
      await page.screenshot({ path: join(shots, 'desktop-guard.png'), fullPage: true });
      assert.deepEqual(browser.errors, []);
    } finally {
      tight.running.child.kill('SIGTERM');
      await tight.running.exited;
    }
  });
});
