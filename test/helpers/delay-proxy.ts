// A TCP proxy that adds latency each way and can cut the link: a distant store, reached across regions, on loopback.
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export interface DelayProxy {
  readonly port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /**
   * Cuts the link: every open connection is dropped and new ones are closed at once, until
   * `heal()`. With `silent`, connections are kept but nothing passes either way (a black hole:
   * calls wait until their client gives up).
   */
  cut(options?: { readonly silent?: boolean }): void;
  heal(): void;
  close(): Promise<void>;
}

/** A pair of sockets the proxy joins, each way delayed. */
interface Link {
  readonly client: Socket;
  readonly server: Socket;
}

/**
 * Listens on a free loopback port and forwards each connection to `targetPort`, holding every chunk
 * `delayMs` before passing it on, in order (timers of one duration fire in the order they were set).
 */
export async function startDelayProxy(targetPort: number, delayMs: number): Promise<DelayProxy> {
  const links = new Set<Link>();
  let state: 'open' | 'cut' | 'silent' = 'open';
  let accepted = 0;
  const forward = (from: Socket, to: Socket): void => {
    from.on('data', (chunk: Buffer) => {
      if (state === 'silent') return;
      setTimeout(() => {
        if (!to.destroyed && state !== 'silent') to.write(chunk);
      }, delayMs);
    });
  };
  const server: Server = createServer((client) => {
    accepted++;
    if (state === 'cut') {
      client.destroy();
      return;
    }
    const upstream = tcpConnect({ host: '127.0.0.1', port: targetPort });
    const link = { client, server: upstream };
    links.add(link);
    const drop = (): void => {
      links.delete(link);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    forward(client, upstream);
    forward(upstream, client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return {
    port,
    get accepted() {
      return accepted;
    },
    cut: (options) => {
      state = options?.silent === true ? 'silent' : 'cut';
      if (state === 'cut') {
        for (const link of links) {
          link.client.destroy();
          link.server.destroy();
        }
        links.clear();
      }
    },
    heal: () => {
      // After a black hole, a connection's replies were lost: its client must connect again.
      if (state === 'silent') {
        for (const link of links) {
          link.client.destroy();
          link.server.destroy();
        }
        links.clear();
      }
      state = 'open';
    },
    close: async () => {
      for (const link of links) {
        link.client.destroy();
        link.server.destroy();
      }
      links.clear();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
