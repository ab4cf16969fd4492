// The conformance app on the fetch adapter, driven with web-standard Requests; the peer as the runtime passes it.
import { type FetchRateLimitOptions, rateLimit } from '../../../../src/http/adapters/fetch.js';
import type { Build } from '../conformance.js';
import { describeInfo } from '../support.js';
import { commonOptions, errorCode, STREAMED } from './common.js';

/** What a runtime passes beside the request (shaped like Deno's `info`). */
interface ServeInfo {
  readonly remoteAddr: { readonly hostname: string | undefined };
}

/** STREAMED as a web stream, its chunks a macrotask apart. */
export function streamed(): ReadableStream<Uint8Array> {
  const chunks = STREAMED.map((chunk) => new TextEncoder().encode(chunk));
  let next = 0;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      await new Promise((resolve) => setImmediate(resolve));
      const chunk = chunks[next++];
      if (chunk === undefined) controller.close();
      else controller.enqueue(chunk);
    },
  });
}

export const buildFetch: Build = async (scenario) => {
  const options: FetchRateLimitOptions = {
    ...commonOptions<Request>(
      scenario,
      (request, name) => request.headers.get(name) ?? undefined,
      (request) => new URL(request.url).pathname,
    ),
    // IPv4-mapped IPv6, as a dual-stack socket reports it: keyed as the IPv4 address.
    remoteAddress: (_request, info: ServeInfo) => info.remoteAddr.hostname,
    ...(scenario.customDenial === true
      ? {
          onDenied: () =>
            new Response('slow down', { status: 429, headers: { 'Content-Type': 'text/plain' } }),
        }
      : {}),
  };
  const limiter = rateLimit(options);
  const handler = limiter.wrap(async (request: Request, info: ServeInfo) => {
    const path = new URL(request.url).pathname;
    if (path === '/fail') return new Response('no', { status: 401 });
    if (path === '/stream') return new Response(streamed(), { headers: { 'Content-Type': 'text/plain' } });
    if (path === '/info') {
      return new Response(describeInfo(limiter.info(request)), {
        headers: { 'Content-Type': 'application/json' },
      });
    }
    if (path === '/admin/key') return new Response((await limiter.clientKey(request, info)) ?? '(none)');
    if (path === '/admin/reset') {
      await limiter.resetKey(request, info);
      return new Response('reset');
    }
    return new Response(path === '/health' ? 'up' : 'ok');
  });
  return {
    key: '10.20.30.40',
    async send(path, headers = {}, sendOptions = {}) {
      const hostname = sendOptions.noPeer === true ? undefined : '::ffff:10.20.30.40';
      let response: Response;
      try {
        response = await handler(new Request(`http://example.test${path}`, { headers }), {
          remoteAddr: { hostname },
        });
      } catch (error) {
        // What a runtime does with a handler that throws: a 500.
        response = new Response(errorCode(error), { status: 500 });
      }
      return {
        status: response.status,
        headers: Object.fromEntries(response.headers),
        body: await response.text(),
      };
    },
    close: async () => {},
  };
};
