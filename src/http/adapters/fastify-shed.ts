// The Fastify shed hook: a ticket per request, released when the reply ends. Imports Fastify's types only.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { admit, releaseOnNodeEnd, resolveShedOptions, type ShedOptions, shedRefusal } from '../shed.js';

/**
 * Sheds load in front of a Fastify app (as an `onRequest` hook) or a route: each request takes a
 * ticket of `shedder` and gives it back when its reply ends (a 5xx, or a client that went away,
 * counted as dropped); a refused one gets 503 with `Retry-After` and a problem body of type
 * temporary-reduced-capacity.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/fastify';
 * app.addHook('onRequest', shed({ shedder: createShedder(), priority: (request) => request.headers['x-priority'] as string }));
 */
export function shed(
  options: ShedOptions<FastifyRequest>,
): (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply | undefined> {
  const config = resolveShedOptions<FastifyRequest>('shed (fastify)', options);
  return async (request, reply) => {
    const admission = await admit(config, request);
    if (admission.allowed) {
      releaseOnNodeEnd(reply.raw, admission);
      return undefined;
    }
    const refusal = shedRefusal(admission);
    reply.code(refusal.status).headers(refusal.headers).send(refusal.body);
    return reply;
  };
}
