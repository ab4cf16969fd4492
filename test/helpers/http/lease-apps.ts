// One listening server per framework for the lease suites: a route whose handler holds each request until
// the test lets it go, so that requests stay in flight, finish, or are abandoned by their client.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { rateLimit as expressLimit } from '../../../src/http/adapters/express.js';
import { rateLimit as fastifyLimit } from '../../../src/http/adapters/fastify.js';
import { rateLimit as fetchLimit } from '../../../src/http/adapters/fetch.js';
import { rateLimit as honoLimit } from '../../../src/http/adapters/hono.js';
import { rateLimit as koaLimit } from '../../../src/http/adapters/koa.js';
import { rateLimit as nodeLimit } from '../../../src/http/adapters/node.js';
import { headerKey } from '../../../src/http/client-key.js';
import type { LimiterSet } from '../../../src/http/options.js';

/** The middleware options every lease app shares: keyed by `x-client`, so that every framework keys alike. */
export interface LeaseOptions {
  readonly limiter: LimiterSet;
  readonly extendLeases?: boolean | number;
}

/**
 * What the handler does with a request: `/hold/<id>` waits for `hold(id)` (and tells `entered(id)`
 * once it runs), any other path answers at once.
 */
export interface Holder {
  entered(id: string): void;
  hold(id: string): Promise<void>;
}

export interface LeaseApp {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  close(): Promise<void>;
}

export type LeaseBuild = (options: LeaseOptions, holder: Holder) => Promise<LeaseApp>;

const KEY = headerKey('x-client');

/** Answers a path: held until the test lets it go, or at once. */
async function answer(path: string, holder: Holder): Promise<string> {
  const held = /^\/hold\/(.+)$/.exec(path)?.[1];
  if (held !== undefined) {
    holder.entered(held);
    await holder.hold(held);
  }
  return 'ok';
}

function listening(server: Server): Promise<LeaseApp> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolve({
        url: `http://127.0.0.1:${port}`,
        close: () =>
          new Promise<void>((done) => {
            server.closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

const buildExpress: LeaseBuild = async (options, holder) => {
  const app = express();
  app.use(expressLimit({ ...options, key: KEY }));
  app.get(/.*/, (req, res) => {
    answer(req.path, holder).then((text) => res.send(text));
  });
  return listening(createServer(app));
};

const buildFastify: LeaseBuild = async (options, holder) => {
  const app = Fastify();
  app.addHook('onRequest', fastifyLimit({ ...options, key: KEY }));
  app.get('/*', async (request) => answer(request.url, holder));
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => app.close() };
};

const buildKoa: LeaseBuild = async (options, holder) => {
  const app = new Koa();
  app.use(koaLimit({ ...options, key: KEY }));
  app.use(async (ctx) => {
    ctx.body = await answer(ctx.path, holder);
  });
  return listening(createServer(app.callback()));
};

const buildNode: LeaseBuild = async (options, holder) => {
  const limit = nodeLimit({ ...options, key: KEY });
  const listener = limit.wrap(async (request, response) => {
    response.end(await answer(request.url ?? '/', holder));
  });
  return listening(createServer(listener));
};

/** A fetch handler served by @hono/node-server, which aborts the request's signal when its client goes away. */
function served(fetch: (request: Request) => Promise<Response>): Promise<LeaseApp> {
  return new Promise((resolve) => {
    const server = serve({ fetch, port: 0, hostname: '127.0.0.1' }, (info) => {
      resolve({
        url: `http://127.0.0.1:${info.port}`,
        close: () =>
          new Promise<void>((done) => {
            (server as Server).closeAllConnections();
            server.close(() => done());
          }),
      });
    });
  });
}

const buildHono: LeaseBuild = async (options, holder) => {
  const app = new Hono();
  app.use(honoLimit({ ...options, key: KEY }));
  app.get('*', async (c) => c.text(await answer(c.req.path, holder)));
  return served((request) => Promise.resolve(app.fetch(request)));
};

const buildFetch: LeaseBuild = async (options, holder) => {
  const limit = fetchLimit({ ...options, key: KEY });
  return served(
    limit.wrap(async (request) => new Response(await answer(new URL(request.url).pathname, holder))),
  );
};

/** Every adapter built on plain TypeScript; NestJS's suite builds its own (test/http/nestjs). */
export const LEASE_APPS: ReadonlyArray<readonly [string, LeaseBuild]> = [
  ['express', buildExpress],
  ['fastify', buildFastify],
  ['koa', buildKoa],
  ['node', buildNode],
  ['hono', buildHono],
  ['fetch', buildFetch],
];
