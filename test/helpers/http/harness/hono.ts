// The conformance app on Hono, driven in-process with app.request; the peer as @hono/node-server passes it.
import { type Context, Hono } from 'hono';
import { type HonoRateLimitOptions, rateLimit } from '../../../../src/http/adapters/hono.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode } from './common.js';
import { streamed } from './fetch.js';

/** What @hono/node-server passes as `c.env`: the Node request, whose socket has the peer's address. */
export const nodeEnv = (address: string) => ({ incoming: { socket: { remoteAddress: address } } });

const PEER = '10.1.2.3';

export const buildHono: Build = async (scenario) => {
  const options: HonoRateLimitOptions = {
    ...commonOptions<Context>(
      scenario,
      (c, name) => c.req.header(name),
      (c) => c.req.path,
    ),
    ...(scenario.customDenial === true ? { onDenied: (c: Context) => c.text('slow down', 429) } : {}),
  };
  const limiter = rateLimit(options);
  // The middleware types the app's variables: c.get('rateLimit') needs no cast.
  const app = new Hono().use(limiter);
  app.get('/ok', (c) => c.text('ok'));
  app.get('/fail', (c) => c.text('no', 401));
  app.get('/health', (c) => c.text('up'));
  app.get('/stream', (c) => c.body(streamed(), 200, { 'Content-Type': 'text/plain' }));
  app.get('/info', (c) =>
    c.body(describeInfo(c.get('rateLimit')), 200, { 'Content-Type': 'application/json' }),
  );
  app.get('/admin/key', async (c) => c.text((await limiter.clientKey(c)) ?? '(none)'));
  app.get('/admin/reset', async (c) => {
    await limiter.resetKey(c);
    return c.text('reset');
  });
  app.onError((error, c) => c.text(errorCode(error), 500));
  return {
    key: PEER,
    async send(path, headers = {}, sendOptions = {}) {
      const env = sendOptions.noPeer === true ? undefined : nodeEnv(PEER);
      const response = await app.request(path, { headers }, env);
      return {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        body: await response.text(),
      };
    },
    close: async () => {},
  };
};
