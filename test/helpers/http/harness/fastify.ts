// The conformance app on Fastify, driven in-process with inject (from 10.0.0.10), as a global hook.
import { Readable } from 'node:stream';
import Fastify, { type FastifyRequest } from 'fastify';
import { type FastifyRateLimitOptions, rateLimit } from '../../../../src/http/adapters/fastify.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode, STREAMED } from './common.js';

const PEER = '10.0.0.10';

/** A header's value as one string (Fastify keeps repeated headers as arrays). */
function headerOf(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

export const buildFastify: Build = async (scenario) => {
  const app = Fastify();
  const options: FastifyRateLimitOptions = {
    ...commonOptions<FastifyRequest>(scenario, headerOf, (request) => request.url.split('?')[0] ?? '/'),
    ...(scenario.customDenial === true
      ? { onDenied: (_request, reply) => void reply.type('text/plain').send('slow down') }
      : {}),
  };
  const limiter = rateLimit(options);
  app.addHook('onRequest', limiter);
  app.get('/ok', async () => 'ok');
  app.get('/fail', async (_request, reply) => reply.code(401).send('no'));
  app.get('/health', async () => 'up');
  app.get('/stream', async (_request, reply) => reply.type('text/plain').send(Readable.from(STREAMED)));
  // The decision is typed on request: no cast.
  app.get('/info', async (request, reply) =>
    reply.type('application/json').send(describeInfo(request.rateLimit)),
  );
  app.get('/admin/key', async (request) => (await limiter.clientKey(request)) ?? '(none)');
  app.get('/admin/reset', async (request) => {
    await limiter.resetKey(request);
    return 'reset';
  });
  app.setErrorHandler((error, _request, reply) => reply.code(500).send(errorCode(error)));
  await app.ready();
  return {
    key: PEER,
    async send(path, headers = {}) {
      const response = await app.inject({ method: 'GET', url: path, headers, remoteAddress: PEER });
      return { status: response.statusCode, headers: response.headers, body: response.body };
    },
    close: () => app.close(),
  };
};
