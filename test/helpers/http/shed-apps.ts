// One listening server per framework with `shed` in front: `/hold/<id>` waits until the test lets it go,
// `/status/<code>` answers that status, `/stream/<id>` sends a first chunk and ends its body once the test lets
// `id` go, anything else answers at once; `x-priority` names the class.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve } from '@hono/node-server';
import express from 'express';
import Fastify from 'fastify';
import { Hono } from 'hono';
import Koa from 'koa';
import { shed as expressShed } from '../../../src/http/adapters/express.js';
import { shed as fastifyShed } from '../../../src/http/adapters/fastify.js';
import { shed as fetchShed } from '../../../src/http/adapters/fetch.js';
import { shed as honoShed } from '../../../src/http/adapters/hono.js';
import { shed as koaShed } from '../../../src/http/adapters/koa.js';
import { shed as nestShed } from '../../../src/http/adapters/nestjs.js';
import { shed as nodeShed } from '../../../src/http/adapters/node.js';
import type { Shedder } from '../../../src/shed/index.js';

/** Lets held requests go, and says which have reached their handler. */
export class Holds {
  readonly entered = new Set<string>();
  readonly #waiting = new Map<string, () => void>();
  readonly #arrivals: Array<() => void> = [];

  hold(id: string): Promise<void> {
    this.entered.add(id);
    for (const arrived of this.#arrivals.splice(0)) arrived();
    return new Promise((resolve) => this.#waiting.set(id, resolve));
  }

  release(id: string): void {
    this.#waiting.get(id)?.();
    this.#waiting.delete(id);
  }

  /** Lets every held request go (before a server closes: some wait for their requests to end). */
  releaseAll(): void {
    for (const id of [...this.#waiting.keys()]) this.release(id);
  }

  /** Resolves once `id` is in its handler. */
  async reached(id: string): Promise<void> {
    while (!this.entered.has(id)) await new Promise<void>((resolve) => this.#arrivals.push(resolve));
  }
}

export interface ShedApp {
  readonly url: string;
  close(): Promise<void>;
}

export type ShedBuild = (shedder: Shedder, holds: Holds) => Promise<ShedApp>;

/** What a path answers: its status and text, after its hold. */
async function answer(path: string, holds: Holds): Promise<[number, string]> {
  const held = /^\/hold\/(.+)$/.exec(path)?.[1];
  if (held !== undefined) await holds.hold(held);
  const status = /^\/status\/(\d+)$/.exec(path)?.[1];
  return [status === undefined ? 200 : Number(status), 'ok'];
}

/** The id of a `/stream/<id>` path: its body's first chunk goes at once, the last once `id` is let go. */
function streamed(path: string): string | undefined {
  return /^\/stream\/(.+)$/.exec(path)?.[1];
}

/** A streamed body for the web-standard apps: `first` now, `last` and the end after the hold. */
function webStream(id: string, holds: Holds): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    async start(controller) {
      controller.enqueue(encoder.encode('first\n'));
      await holds.hold(id);
      try {
        controller.enqueue(encoder.encode('last\n'));
        controller.close();
      } catch {
        // Cancelled meanwhile: its client went away.
      }
    },
  });
}

/** The same on a Node response. */
async function nodeStream(id: string, holds: Holds, response: ServerResponse): Promise<void> {
  response.statusCode = 200;
  response.write('first\n');
  await holds.hold(id);
  response.end('last\n');
}

function nodePriority(request: IncomingMessage): string | undefined {
  const value = request.headers['x-priority'];
  return typeof value === 'string' ? value : undefined;
}

function listening(server: Server): Promise<ShedApp> {
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

function served(fetch: (request: Request) => Promise<Response>): Promise<ShedApp> {
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

const buildExpress: ShedBuild = async (shedder, holds) => {
  const app = express();
  app.use(expressShed({ shedder, priority: (req) => req.get('x-priority') }));
  app.get(/.*/, (req, res) => {
    const stream = streamed(req.path);
    if (stream !== undefined) return void nodeStream(stream, holds, res);
    answer(req.path, holds).then(([status, text]) => res.status(status).send(text));
  });
  return listening(createServer(app));
};

const buildFastify: ShedBuild = async (shedder, holds) => {
  const app = Fastify();
  app.addHook('onRequest', fastifyShed({ shedder, priority: (request) => nodePriority(request.raw) }));
  app.get('/*', async (request, reply) => {
    const stream = streamed(request.url);
    if (stream !== undefined) {
      reply.hijack();
      return nodeStream(stream, holds, reply.raw);
    }
    const [status, text] = await answer(request.url, holds);
    return reply.code(status).send(text);
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = app.server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      // A reply a failed assertion left unread would hold close() forever.
      app.server.closeAllConnections();
      return app.close();
    },
  };
};

const buildKoa: ShedBuild = async (shedder, holds) => {
  const app = new Koa();
  app.use(koaShed({ shedder, priority: (ctx) => ctx.get('x-priority') || undefined }));
  app.use(async (ctx) => {
    const stream = streamed(ctx.path);
    if (stream !== undefined) {
      ctx.respond = false;
      return nodeStream(stream, holds, ctx.res);
    }
    const [status, text] = await answer(ctx.path, holds);
    ctx.status = status;
    ctx.body = text;
  });
  return listening(createServer(app.callback()));
};

const buildNode: ShedBuild = async (shedder, holds) => {
  const guard = nodeShed({ shedder, priority: nodePriority });
  return listening(
    createServer(
      guard.wrap(async (request, response) => {
        const stream = streamed(request.url ?? '/');
        if (stream !== undefined) return nodeStream(stream, holds, response);
        const [status, text] = await answer(request.url ?? '/', holds);
        response.statusCode = status;
        response.end(text);
      }),
    ),
  );
};

/** NestJS's `shed` is a functional middleware on Node's request and response: mounted as Nest mounts one. */
const buildNest: ShedBuild = async (shedder, holds) => {
  const middleware = nestShed({ shedder, priority: nodePriority });
  return listening(
    createServer((request, response) => {
      middleware(request, response, async () => {
        const stream = streamed(request.url ?? '/');
        if (stream !== undefined) return nodeStream(stream, holds, response);
        const [status, text] = await answer(request.url ?? '/', holds);
        response.statusCode = status;
        response.end(text);
      });
    }),
  );
};

const buildHono: ShedBuild = async (shedder, holds) => {
  const app = new Hono();
  app.use(honoShed({ shedder, priority: (c) => c.req.header('x-priority') }));
  app.get('*', async (c) => {
    const stream = streamed(c.req.path);
    if (stream !== undefined) return c.body(webStream(stream, holds));
    const [status, text] = await answer(c.req.path, holds);
    return c.text(text, status as 200);
  });
  return served((request) => Promise.resolve(app.fetch(request)));
};

const buildFetch: ShedBuild = async (shedder, holds) => {
  const guard = fetchShed({ shedder, priority: (request) => request.headers.get('x-priority') ?? undefined });
  return served(
    guard.wrap(async (request) => {
      const path = new URL(request.url).pathname;
      const stream = streamed(path);
      if (stream !== undefined) return new Response(webStream(stream, holds));
      const [status, text] = await answer(path, holds);
      return new Response(text, { status });
    }),
  );
};

export const SHED_APPS: ReadonlyArray<readonly [string, ShedBuild]> = [
  ['express', buildExpress],
  ['fastify', buildFastify],
  ['koa', buildKoa],
  ['node', buildNode],
  ['nestjs', buildNest],
  ['hono', buildHono],
  ['fetch', buildFetch],
];
