// Whether a store's client has connected yet: calls made before the first connection wait for it
// (up to connectTimeoutMs), so a process that has just started does not answer with its failure policy.
import { ERROR_CODES, SluiceError } from '../../errors.js';
import type { Commander } from './commander.js';

interface Wait {
  readonly promise: Promise<void>;
  settled: boolean;
}

/** The first connection of one client, as a store waits for it. */
export class Readiness {
  readonly #commander: Commander;
  readonly #timeoutMs: number;
  /** Set once the client has been seen connected: later outages are the failure policy's, not waited for. */
  #connected = false;
  #wait: Wait | undefined;

  constructor(commander: Commander, timeoutMs: number) {
    this.#commander = commander;
    this.#timeoutMs = timeoutMs;
    // A client handed over connected has made its first connection: later outages are not waited for.
    this.#connected = commander.isReady();
  }

  /**
   * `undefined` once the client has connected at least once. Before that, the wait for the first
   * connection, bounded by the connect timeout; after that wait has failed, the same rejected
   * promise, so calls do not each wait again (the failure policy answers at once).
   */
  untilReady(): Promise<void> | undefined {
    if (this.#connected) return undefined;
    if (this.#commander.isReady()) {
      this.#connected = true;
      return undefined;
    }
    this.#wait ??= this.#start();
    return this.#wait.promise;
  }

  /**
   * Resolves once the client is connected now (not merely once before), waiting up to the connect
   * timeout; a wait that has ended before is started anew, since an app asked to wait.
   */
  ready(): Promise<void> {
    if (this.#commander.isReady()) {
      this.#connected = true;
      return Promise.resolve();
    }
    if (this.#wait === undefined || this.#wait.settled) this.#wait = this.#start();
    return this.#wait.promise;
  }

  #start(): Wait {
    // Assigned before the timer can fire.
    let wait: Wait | undefined;
    const promise = new Promise<void>((resolve, reject) => {
      const stop = this.#commander.whenReady(() => {
        clearTimeout(timer);
        this.#connected = true;
        if (wait !== undefined) wait.settled = true;
        resolve();
      });
      const timer = setTimeout(() => {
        stop();
        if (wait !== undefined) wait.settled = true;
        reject(
          new SluiceError(
            ERROR_CODES.STORE,
            `Redis store could not connect to ${this.#commander.address} within ${this.#timeoutMs} ms (RedisStore.connectTimeoutMs).`,
          ),
        );
      }, this.#timeoutMs);
      // A process with nothing else to do need not stay up for this timer.
      timer.unref();
    });
    // Callers handle it; kept here, a rejection must not count as unhandled.
    promise.catch(() => {});
    wait = { promise, settled: false };
    return wait;
  }
}
