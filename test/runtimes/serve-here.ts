// Serves a fetch handler with the HTTP server of the runtime running the test: Bun.serve, Deno.serve, or @hono/node-server on Node.

/** The name and version of the runtime running this file, as the matrix reports it. */
export interface RuntimeName {
  readonly name: 'node' | 'bun' | 'deno';
  readonly version: string;
}

// Only the members used here, typed locally: the suites compile with Node's types alone.
interface BunGlobal {
  readonly version: string;
  serve(options: {
    port: number;
    hostname: string;
    fetch: (request: Request, server: BunServer) => Response | Promise<Response>;
  }): BunServer;
}
interface BunServer {
  readonly port: number;
  requestIP(request: Request): { address: string } | null;
  stop(closeActiveConnections?: boolean): Promise<void> | void;
}
interface DenoGlobal {
  readonly version: { readonly deno: string };
  serve(
    options: { port: number; hostname: string; onListen?: () => void },
    handler: (request: Request, info: DenoServeInfo) => Response | Promise<Response>,
  ): { readonly addr: { readonly port: number }; shutdown(): Promise<void> };
}
interface DenoServeInfo {
  readonly remoteAddr: { readonly hostname: string };
}

const bun = (globalThis as { Bun?: BunGlobal }).Bun;
const deno = (globalThis as { Deno?: DenoGlobal }).Deno;

export const RUNTIME: RuntimeName =
  bun !== undefined
    ? { name: 'bun', version: bun.version }
    : deno !== undefined
      ? { name: 'deno', version: deno.version.deno }
      : { name: 'node', version: process.versions.node };

/** A handler as the fetch adapter wraps it: the request, then what the runtime passes. */
export type Handler = (request: Request, ...context: never[]) => Response | Promise<Response>;

export interface Served {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string;
  /** Which server answers: `Bun.serve`, `Deno.serve` or `@hono/node-server`. */
  readonly server: string;
  close(): Promise<void>;
}

/**
 * The peer's address from what this runtime's server passes after the request, as an application
 * gives it to the fetch adapter's `remoteAddress`: Bun's server, Deno's info, @hono/node-server's env.
 */
export function peerAddress(_request: Request, ...context: unknown[]): string | undefined {
  const [second] = context;
  if (RUNTIME.name === 'bun') return (second as BunServer).requestIP(_request)?.address;
  if (RUNTIME.name === 'deno') return (second as DenoServeInfo).remoteAddr.hostname;
  return (second as { incoming: { socket: { remoteAddress?: string } } }).incoming.socket.remoteAddress;
}

/** Serves `handler` on a free loopback port with this runtime's own server. */
export async function serveHere(handler: Handler): Promise<Served> {
  // The handler receives whatever the server passes; its parameter types are the application's business.
  const call = handler as (request: Request, ...context: unknown[]) => Response | Promise<Response>;
  if (bun !== undefined) {
    const server = bun.serve({ port: 0, hostname: '127.0.0.1', fetch: (request, s) => call(request, s) });
    return {
      origin: `http://127.0.0.1:${server.port}`,
      server: 'Bun.serve',
      close: async () => {
        await server.stop(true);
      },
    };
  }
  if (deno !== undefined) {
    const server = deno.serve({ port: 0, hostname: '127.0.0.1', onListen: () => {} }, (request, info) =>
      call(request, info),
    );
    return {
      origin: `http://127.0.0.1:${server.addr.port}`,
      server: 'Deno.serve',
      close: () => server.shutdown(),
    };
  }
  // Imported only here: Bun and Deno never load the Node adapter.
  const { serve } = await import('@hono/node-server');
  const { server, port } = await new Promise<{ server: ReturnType<typeof serve>; port: number }>(
    (resolve) => {
      const started = serve(
        { fetch: (request, env) => call(request, env), port: 0, hostname: '127.0.0.1' },
        (info) => resolve({ server: started, port: info.port }),
      );
    },
  );
  return {
    origin: `http://127.0.0.1:${port}`,
    server: '@hono/node-server',
    close: () =>
      new Promise<void>((resolve) => {
        // Keep-alive sockets from the test's own fetch would hold close() open.
        (server as { closeAllConnections?: () => void }).closeAllConnections?.();
        server.close(() => resolve());
      }),
  };
}
