// How a limiter hands requests to its store: the store's `submit`, or its `decide` one request at a time.
import { ERROR_CODES, SluiceError } from '../errors.js';
import type { AtomicBatch, Store, StoreReply, StoreRequest } from '../types.js';

/** What the pipeline submits to: the store itself when it has `submit`. */
export type Submitter = Required<Pick<Store, 'submit'>>;

/** The store, or for a store of one's own with only `decide`, a submitter made of it. */
export function submitter(store: Store): Submitter {
  if (typeof store.submit === 'function') return store as Submitter;
  return {
    submit<R extends StoreRequest>(
      requests: readonly R[],
      reply: StoreReply<R>,
      together?: AtomicBatch,
    ): void {
      if (together !== undefined) {
        // all() refuses an atomic group on such a store (see atomicGroupError): never reached.
        throw new SluiceError(
          ERROR_CODES.INVALID_OPTION,
          `The ${store.kind} store cannot decide requests together.`,
        );
      }
      for (const request of requests) {
        store.decide(request).then(
          (result) => reply.answered(request, result),
          (error: unknown) => reply.failed(request, error),
        );
      }
    },
  };
}
