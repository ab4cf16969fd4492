// What every middleware offers besides guarding requests: the key a request is charged under, and forgetting it.
import type { ResolvedOptions } from './options.js';
import { type RequestKey, requestKey } from './request-key.js';
import type { RequestView } from './view.js';

/** Inspecting and resetting clients by their requests, with the middleware's own key rules. */
export interface KeyControls<Args extends readonly unknown[]> {
  /**
   * The identifier a request is charged under, as the middleware computes it (an IPv6 client's
   * `/56`, a header, your function's result; several joined by spaces), or `undefined` when the
   * request is not limited or carries no usable key (with `missingKey: 'deny'`).
   */
  clientKey(...args: Args): Promise<string | undefined>;
  /**
   * Forgets the request's client in every limiter that decides the request, and lifts its
   * penalties (`ban`, `block`): its next request starts with a full allowance.
   */
  resetKey(...args: Args): Promise<void>;
}

/** The controls of one middleware; `prepare` turns an adapter's arguments into its request and view. */
export function keyControls<Req, Args extends readonly unknown[]>(
  config: ResolvedOptions<Req>,
  prepare: (...args: Args) => { readonly request: Req; readonly view: RequestView },
): KeyControls<Args> {
  const find = async (args: Args) => {
    const { request, view } = prepare(...args);
    const group = config.selectGroup(request, view);
    if (group === undefined) return undefined;
    const keyed: RequestKey | { missing: string } = await requestKey(
      config,
      request,
      view,
      group.pipelines.length,
    );
    return 'missing' in keyed ? undefined : { group, keyed };
  };
  return {
    clientKey: async (...args) => (await find(args))?.keyed.key,
    resetKey: async (...args) => {
      const found = await find(args);
      if (found === undefined) return;
      const { group, keyed } = found;
      await Promise.all([
        group.reset(keyed.identifiers, keyed.tag),
        config.penalties?.(group).reset(keyed.key),
      ]);
    },
  };
}
