// The conformance app on node:http, on a real loopback server driven with supertest.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  type NodeRateLimiter,
  type NodeRateLimitOptions,
  rateLimit,
} from '../../../../src/http/adapters/node.js';
import type { RateLimitInfo } from '../../../../src/http/info.js';
import { pathOf } from '../../../../src/http/view.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode, STREAMED, supertestSend } from './common.js';

/** Listens on 127.0.0.1 (a real socket: the peer address is the loopback client's). */
export async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

export function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}

function answerWith(limiter: NodeRateLimiter) {
  return async (req: IncomingMessage, res: ServerResponse, info: RateLimitInfo | undefined) => {
    const path = pathOf(req.url);
    let body = path === '/health' ? 'up' : 'ok';
    if (path === '/fail') {
      res.statusCode = 401;
      body = 'no';
    } else if (path === '/info') {
      body = describeInfo(info);
      res.setHeader('Content-Type', 'application/json');
    } else if (path === '/admin/key') {
      body = (await limiter.clientKey(req)) ?? '(none)';
    } else if (path === '/admin/reset') {
      await limiter.resetKey(req);
      body = 'reset';
    } else if (path === '/stream') {
      res.setHeader('Content-Type', 'text/plain');
      res.write(STREAMED[0]);
      setImmediate(() => res.end(STREAMED[1]));
      return;
    }
    res.end(body);
  };
}

export const buildNode: Build = async (scenario) => {
  const header = (req: IncomingMessage, name: string): string | undefined => {
    const value = req.headers[name];
    return Array.isArray(value) ? value.join(', ') : value;
  };
  const options: NodeRateLimitOptions = {
    ...commonOptions<IncomingMessage>(scenario, header, (req) => pathOf(req.url)),
    ...(scenario.customDenial === true
      ? {
          onDenied: (_req, res) => {
            res.setHeader('Content-Type', 'text/plain');
            res.end('slow down');
          },
        }
      : {}),
    onError: (error, _req, res) => {
      res.statusCode = 500;
      res.end(errorCode(error));
    },
  };
  const limiter = rateLimit(options);
  const server = createServer(limiter.wrap(answerWith(limiter)));
  const url = await listen(server);
  return {
    key: '127.0.0.1',
    send: supertestSend(url),
    close: () => closeServer(server),
  };
};
