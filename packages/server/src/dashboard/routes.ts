// The service's admin routes: the dashboard page and its data, and /metrics, behind AdminAccess.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { PROBLEM_CONTENT_TYPE } from 'sluice/http';
import type { Route } from '../service/service.js';
import type { AdminAccess } from './access.js';
import { DASHBOARD_ASSETS } from './assets.generated.js';

/** What /metrics serves: a prom-client registry, or why there is none. */
export type MetricsSource =
  | { readonly metrics: () => Promise<string>; readonly contentType: string }
  | { readonly unavailable: string };

export interface AdminRoutesOptions {
  readonly access: AdminAccess;
  /** The dashboard's data document. */
  readonly data: () => unknown;
  readonly metrics: MetricsSource;
}

/** Answers a request the admin routes own and resolves `true`; resolves `false` for any other. */
export type AdminRoutes = (
  request: IncomingMessage,
  response: ServerResponse,
  path: string,
) => Promise<boolean>;

const ASSET_PATHS: Readonly<Record<string, string>> = {
  '/dashboard/app.js': 'app.js',
  '/dashboard/app.css': 'app.css',
};

// The page runs only its own script and style and talks only to this service.
const PAGE_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

function send(response: ServerResponse, status: number, contentType: string, body: string): void {
  response.statusCode = status;
  response.setHeader('Content-Type', contentType);
  response.setHeader('Content-Length', Buffer.byteLength(body));
  // Identifiers are personal data: no cache keeps them.
  response.setHeader('Cache-Control', 'no-store');
  response.setHeader('X-Content-Type-Options', 'nosniff');
  response.end(body);
}

function problem(
  response: ServerResponse,
  status: number,
  title: string,
  detail: string,
  headers: Record<string, string | string[]> = {},
): void {
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
  send(
    response,
    status,
    PROBLEM_CONTENT_TYPE,
    `${JSON.stringify({ type: 'about:blank', title, status, detail }, null, 2)}\n`,
  );
}

/** Whether a request for `/` comes from a browser (which gets the page) rather than a script (the route list). */
function wantsPage(request: IncomingMessage): boolean {
  return (request.headers.accept ?? '').includes('text/html');
}

/** The admin routes: `GET /` (the page, for browsers), `/dashboard/*`, `GET /metrics`. */
export function adminRoutes(options: AdminRoutesOptions): AdminRoutes {
  const { access } = options;
  return async (request, response, path) => {
    const asset = ASSET_PATHS[path];
    const owned =
      (path === '/' && wantsPage(request)) ||
      asset !== undefined ||
      path === '/dashboard/data' ||
      path === '/metrics';
    if (!owned) return false;
    const method = request.method ?? 'GET';
    if (method !== 'GET' && method !== 'HEAD') {
      problem(response, 405, 'Method Not Allowed', `${path} answers GET only.`, { Allow: 'GET' });
      return true;
    }
    const verdict = access.check(request);
    if (!verdict.ok) {
      const challenge =
        verdict.status === 401
          ? {
              'WWW-Authenticate': [
                'Basic realm="sluice admin", charset="UTF-8"',
                'Bearer realm="sluice admin"',
              ],
            }
          : {};
      problem(
        response,
        verdict.status,
        verdict.status === 401 ? 'Unauthorized' : 'Forbidden',
        verdict.detail,
        challenge,
      );
      return true;
    }
    if (path === '/') {
      const page = DASHBOARD_ASSETS['index.html'] as { contentType: string; body: string };
      response.setHeader('Content-Security-Policy', PAGE_POLICY);
      response.setHeader('Referrer-Policy', 'no-referrer');
      send(response, 200, page.contentType, page.body);
    } else if (asset !== undefined) {
      const file = DASHBOARD_ASSETS[asset] as { contentType: string; body: string };
      send(response, 200, file.contentType, file.body);
    } else if (path === '/dashboard/data') {
      send(response, 200, 'application/json', `${JSON.stringify(options.data())}\n`);
    } else if ('unavailable' in options.metrics) {
      problem(response, 503, 'Service Unavailable', options.metrics.unavailable);
    } else {
      send(response, 200, options.metrics.contentType, await options.metrics.metrics());
    }
    return true;
  };
}

/**
 * The admin routes as the service's route table takes them. `GET /` declines a request that is
 * not a browser's, so scripts still get the route list it replaces.
 */
export function adminRouteList(admin: AdminRoutes): Route[] {
  const summaries: Record<string, string | undefined> = {
    '/': 'in a browser: the live dashboard',
    '/dashboard/data': "the dashboard's data",
    '/metrics': 'Prometheus metrics',
  };
  return ['/', ...Object.keys(ASSET_PATHS), '/dashboard/data', '/metrics'].map((path) => {
    const summary = summaries[path];
    return {
      method: 'GET',
      path,
      ...(summary === undefined ? {} : { summary }),
      handle: (request, response) => admin(request, response, path),
    };
  });
}
