// The framework-free view of a request that key extractors, route rules and the core read.

/** What sluice needs to know of a request, whatever framework received it. */
export interface RequestView {
  /** Upper-case method, e.g. `GET`. */
  readonly method: string;
  /** The path without the query string, e.g. `/api/items`. */
  readonly path: string;
  /** The address of the socket's peer (the client, or the nearest proxy); `undefined` when unknown. */
  readonly remoteAddress: string | undefined;
  /** A header's value by lower-case name; repeated headers joined with `, `. */
  header(name: string): string | undefined;
}

/** The path of a request target: `/a/b?x=1` -> `/a/b`; an absolute URL gives its path. */
export function pathOf(target: string | undefined): string {
  if (target === undefined || target === '') return '/';
  let path = target;
  if (!path.startsWith('/')) {
    const scheme = path.indexOf('://');
    if (scheme !== -1) {
      const slash = path.indexOf('/', scheme + 3);
      path = slash === -1 ? '/' : path.slice(slash);
    }
  }
  const end = path.search(/[?#]/);
  return end === -1 ? path : path.slice(0, end);
}

/** A view over Node's `IncomingMessage`-shaped requests (node:http, Express, Fastify's `raw`). */
export function nodeRequestView(request: {
  readonly method?: string | undefined;
  readonly url?: string | undefined;
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly socket?: { readonly remoteAddress?: string | undefined } | null | undefined;
}): RequestView {
  return {
    method: (request.method ?? 'GET').toUpperCase(),
    path: pathOf(request.url),
    remoteAddress: request.socket?.remoteAddress,
    header(name) {
      const value = request.headers[name];
      if (value === undefined) return undefined;
      return typeof value === 'string' ? value : value.join(', ');
    },
  };
}

/** A view over a web-standard `Request`; the runtime tells the peer's address, if it can. */
export function fetchRequestView(request: Request, remoteAddress: string | undefined): RequestView {
  let path: string;
  try {
    path = new URL(request.url).pathname;
  } catch {
    path = pathOf(request.url);
  }
  return {
    method: request.method.toUpperCase(),
    path,
    remoteAddress,
    header: (name) => request.headers.get(name) ?? undefined,
  };
}
