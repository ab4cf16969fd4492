// What the store needs from a client library, whichever it is: the adapters implement this.

/** The client libraries sluice recognises, as decisions, warnings and banners name them. */
export type ClientLibrary = 'ioredis' | 'iovalkey' | 'node-redis' | 'valkey-glide';

/** What the store needs from a client: send one command routed by a key, reach every primary, know when it can send. */
export interface Commander {
  readonly library: ClientLibrary;
  readonly cluster: boolean;
  /** Where the client connects, for messages: `host:port`, or the cluster's startup nodes. */
  readonly address: string;
  /** Sends one command; on a cluster it goes to the primary that owns `key`. */
  send(args: readonly string[], key: string): Promise<unknown>;
  /** Sends one keyless command (SCRIPT LOAD) to the primary that owns `key`. */
  sendToOwner(args: readonly string[], key: string): Promise<unknown>;
  /**
   * On a cluster, sends one keyless command to every primary, as far as each can be reached (a node
   * that a call reached by ASK is not the slot's owner yet). Resolves whatever the replies.
   */
  broadcast(args: readonly string[]): Promise<void>;
  /** Whether the client is connected and can send now. */
  isReady(): boolean;
  /**
   * Calls `listener` once the client is connected (starting the connection of a client made with
   * `lazyConnect` that nobody has connected yet). Returns a function that stops listening.
   */
  whenReady(listener: () => void): () => void;
  /** On a cluster, the address (`host:port`) of the primary that owns `slot` in the client's slot table. */
  primaryOf(slot: number): string | undefined;
}

export type AnyFunction = (...args: never[]) => unknown;

/** `broadcast` for a single node: `sendToOwner` has reached it already. */
export async function noBroadcast(): Promise<void> {}

/** Waits for every send, whatever each one's outcome. */
export async function settleAll(sends: ReadonlyArray<Promise<unknown>>): Promise<void> {
  await Promise.allSettled(sends);
}

export function isFunction(value: unknown): value is AnyFunction {
  return typeof value === 'function';
}

interface Emitter {
  on(event: string, listener: () => void): unknown;
  off(event: string, listener: () => void): unknown;
}

/**
 * Listens to `events` until one arrives while `isReady()` holds, then stops and calls `listener`.
 * Returns a function that stops listening.
 */
export function listenUntilReady(
  emitter: Emitter,
  events: readonly string[],
  isReady: () => boolean,
  listener: () => void,
): () => void {
  const stop = (): void => {
    for (const event of events) emitter.off(event, check);
  };
  function check(): void {
    if (!isReady()) return;
    stop();
    listener();
  }
  for (const event of events) emitter.on(event, check);
  return stop;
}
