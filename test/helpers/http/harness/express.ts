// The conformance app on Express, driven in-process with supertest (from 127.0.0.1).
import express, { type NextFunction, type Request, type Response } from 'express';
import { type ExpressRateLimitOptions, rateLimit } from '../../../../src/http/adapters/express.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode, STREAMED, supertestSend } from './common.js';

export const buildExpress: Build = async (scenario) => {
  const app = express();
  const options: ExpressRateLimitOptions = {
    ...commonOptions<Request>(
      scenario,
      (req, name) => req.get(name),
      (req) => req.path,
    ),
    ...(scenario.customDenial === true
      ? { onDenied: (_req, res) => void res.type('text/plain').send('slow down') }
      : {}),
  };
  const limiter = rateLimit(options);
  app.use(limiter);
  app.get('/ok', (_req, res) => void res.send('ok'));
  app.get('/fail', (_req, res) => void res.status(401).send('no'));
  app.get('/health', (_req, res) => void res.send('up'));
  app.get('/stream', (_req, res) => {
    res.type('text/plain');
    res.write(STREAMED[0]);
    setImmediate(() => res.end(STREAMED[1]));
  });
  // The decision is typed on req (and res.locals has it too): no cast.
  app.get('/info', (req, res) => void res.type('application/json').send(describeInfo(req.rateLimit)));
  app.get('/admin/key', async (req, res) => void res.send((await limiter.clientKey(req)) ?? '(none)'));
  app.get('/admin/reset', async (req, res) => {
    await limiter.resetKey(req);
    res.send('reset');
  });
  app.use((error: unknown, _req: Request, res: Response, _next: NextFunction) => {
    res.status(500).send(errorCode(error));
  });
  return {
    key: '127.0.0.1',
    send: supertestSend(app),
    close: async () => {},
  };
};
