// The Valkey GLIDE adapter (GlideClient, GlideClusterClient): every script call through customCommand,
// routed to the primary of the batch's slot, so many decisions still share one call.
import { type Commander, noBroadcast, settleAll } from './commander.js';

type Route = 'allPrimaries' | { readonly type: 'primarySlotKey'; readonly key: string };

export interface GlideLike {
  customCommand(args: string[], options?: { route?: Route }): Promise<unknown>;
  /** The options the client was created with. */
  readonly config?: {
    readonly addresses?: ReadonlyArray<{ host?: string; port?: number }>;
    readonly lazyConnect?: boolean;
  };
  readonly isClosed?: boolean;
}

/** GlideClusterClient routes; GlideClient has no `...WithRoute` methods. */
export function isGlideCluster(client: GlideLike): boolean {
  return typeof (client as { fcallWithRoute?: unknown }).fcallWithRoute === 'function';
}

export function glideCommander(glide: GlideLike, cluster: boolean): Commander {
  const addresses = (glide.config?.addresses ?? []).map(
    ({ host, port }) => `${host ?? 'localhost'}:${port ?? 6379}`,
  );
  // createClient() resolves once connected; only a client made with lazyConnect may not be yet.
  let connected = glide.config?.lazyConnect !== true;
  let connecting: Promise<unknown> | undefined;
  return {
    library: 'valkey-glide',
    cluster,
    address: cluster ? `the cluster at ${addresses.join(', ')}` : (addresses[0] ?? 'localhost:6379'),
    send: cluster
      ? (args, key) => glide.customCommand(args as string[], { route: { type: 'primarySlotKey', key } })
      : (args) => glide.customCommand(args as string[]),
    // A keyless command routed as a keyed one would be: to the primary of the key's slot.
    sendToOwner: cluster
      ? (args, key) => glide.customCommand(args as string[], { route: { type: 'primarySlotKey', key } })
      : (args) => glide.customCommand(args as string[]),
    broadcast: cluster
      ? (args) => settleAll([glide.customCommand(args as string[], { route: 'allPrimaries' })])
      : noBroadcast,
    isReady: () => connected && glide.isClosed !== true,
    whenReady: (listener) => {
      let listening = true;
      // A lazy client connects on its first command: a PING makes it.
      connecting ??= glide.customCommand(['PING']);
      connecting.then(
        () => {
          connected = true;
          if (listening) listener();
        },
        () => {
          connecting = undefined;
        },
      );
      return () => {
        listening = false;
      };
    },
    // GLIDE keeps its slot table in its native core and does not expose it to JavaScript.
    primaryOf: () => undefined,
  };
}
