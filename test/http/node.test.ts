// node:http on a real loopback server, driven with supertest: the common behaviour, the guard, errors, keys.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, it } from 'node:test';
import request from 'supertest';
import { rateLimit } from '../../src/http/adapters/node.js';
import { clientIp } from '../../src/http/client-key.js';
import { pathOf } from '../../src/http/view.js';
import { conformance } from '../helpers/http/conformance.js';
import { buildNode, closeServer as close, listen } from '../helpers/http/harness/node.js';
import { memoryLimiter, rateLimitItem, SECONDS_LEFT, type TestLimiter } from '../helpers/http/support.js';

function answer(req: IncomingMessage, res: ServerResponse): void {
  const path = pathOf(req.url);
  res.statusCode = path === '/fail' ? 401 : 200;
  res.end(path === '/fail' ? 'no' : path === '/health' ? 'up' : 'ok');
}

conformance('node:http', buildNode);

describe('node:http: specifics', () => {
  const opened: TestLimiter[] = [];
  const servers: Server[] = [];
  const limiterOf = (limit: number, name?: string) => {
    const made = memoryLimiter(limit, name);
    opened.push(made);
    return made.limiter;
  };
  afterEach(async () => {
    for (const made of opened.splice(0)) made.close();
    for (const server of servers.splice(0)) await close(server);
  });

  it('the bare guard resolves true with headers set, false once it has answered 429', async () => {
    const limit = rateLimit({ limiter: limiterOf(1) });
    const verdicts: boolean[] = [];
    const server = createServer(async (req, res) => {
      const proceed = await limit(req, res);
      verdicts.push(proceed);
      if (proceed) res.end('ok');
    });
    servers.push(server);
    const url = await listen(server);
    const first = await request(url).get('/');
    assert.deepEqual(rateLimitItem(first.headers, 'api'), { r: 0, t: SECONDS_LEFT });
    assert.equal((await request(url).get('/')).status, 429);
    assert.deepEqual(verdicts, [true, false]);
  });

  it('a spoofed X-Forwarded-For from a direct client never changes its key', async () => {
    const limiter = limiterOf(3);
    const server = createServer(rateLimit({ limiter }).wrap(answer));
    servers.push(server);
    const url = await listen(server);
    for (const spoof of ['1.2.3.4', '5.6.7.8', '1.2.3.4, 9.9.9.9']) {
      assert.equal((await request(url).get('/ok').set('X-Forwarded-For', spoof)).status, 200);
    }
    const refused = await request(url).get('/ok').set('X-Forwarded-For', '10.10.10.10');
    assert.equal(refused.status, 429, 'every spoofed address landed in the socket address bucket');
    assert.equal((await limiter.peek('127.0.0.1')).remaining, 0);
    assert.equal((await limiter.peek('1.2.3.4')).remaining, 3);
  });

  it('a trusted loopback proxy: the Forwarded header names the client', async () => {
    const limiter = limiterOf(3);
    const key = clientIp({ trustProxy: ['loopback'], proxyHeader: 'forwarded' });
    const server = createServer(rateLimit({ limiter, key }).wrap(answer));
    servers.push(server);
    const url = await listen(server);
    await request(url).get('/ok').set('Forwarded', 'for="[2001:db8:cafe:1200::17]:4711";proto=https');
    await request(url).get('/ok').set('Forwarded', 'for="[2001:db8:cafe:12ff::1]"');
    assert.equal(
      (await limiter.peek('2001:db8:cafe:1200::/56')).remaining,
      1,
      'both addresses share one /56',
    );
    await request(url).get('/ok').set('X-Forwarded-For', '198.51.100.7');
    assert.equal(
      (await limiter.peek('198.51.100.7')).remaining,
      3,
      'X-Forwarded-For is not the configured header',
    );
    assert.equal(
      (await limiter.peek('127.0.0.1')).remaining,
      2,
      'without Forwarded, the proxy itself is the key',
    );
  });

  it('wrap answers 500 when a function throws, and onError can take over', async () => {
    const throwing = {
      limiter: limiterOf(3),
      skip: (): boolean => {
        throw new Error('skip broke');
      },
    };
    const plain = createServer(rateLimit(throwing).wrap(answer));
    const seen: unknown[] = [];
    const custom = createServer(
      rateLimit({
        ...throwing,
        onError: (error, _req, res) => {
          seen.push(error);
          res.statusCode = 503;
          res.end('later');
        },
      }).wrap(answer),
    );
    servers.push(plain, custom);
    assert.equal((await request(await listen(plain)).get('/ok')).status, 500);
    const reply = await request(await listen(custom)).get('/ok');
    assert.equal(reply.status, 503);
    assert.equal((seen[0] as Error).message, 'skip broke');
  });
});
