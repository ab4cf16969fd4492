// The NestJS shed middleware: Node's request and response, which Nest hands middleware on both platforms.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { nodeShedMiddleware, resolveShedOptions, type ShedOptions } from '../shed.js';

/**
 * Sheds load in front of a Nest app, as a functional middleware (`consumer.apply(shed(...))` or
 * `app.use(shed(...))`), on @nestjs/platform-express and @nestjs/platform-fastify alike: each
 * request takes a ticket of `shedder` and gives it back when its response ends (a 5xx, or a client
 * that went away, counted as dropped); a refused one gets 503 with `Retry-After` and a problem
 * body of type temporary-reduced-capacity. `priority` receives Node's request.
 *
 * @example
 * import { createShedder } from 'sluice/shed';
 * import { shed } from 'sluice/nestjs';
 * const app = await NestFactory.create(AppModule);
 * app.use(shed({ shedder: createShedder() }));
 */
export function shed(
  options: ShedOptions<IncomingMessage>,
): (request: IncomingMessage, response: ServerResponse, next: (error?: unknown) => void) => void {
  return nodeShedMiddleware(resolveShedOptions<IncomingMessage>('shed (nestjs)', options));
}
