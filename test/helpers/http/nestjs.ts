// A Nest application for the suites, on Express or Fastify, started on a loopback port and called over HTTP.
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import {
  type ArgumentsHost,
  Catch,
  Controller,
  Get,
  Header,
  HttpException,
  type HttpServer,
  type INestApplication,
  Module,
  Req,
  StreamableFile,
  type Type,
} from '@nestjs/common';
import { APP_GUARD, BaseExceptionFilter, NestFactory } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import {
  type NestHttpRequest,
  RateLimitDecision,
  RateLimitException,
  type RateLimitInfo,
  SluiceGuard,
  SluiceModule,
  type SluiceModuleOptions,
  SluiceService,
} from '../../../src/http/adapters/nestjs.js';
import type { Build } from './conformance.js';
import { commonOptions, errorCode, STREAMED, supertestSend } from './harness/common.js';
import { describeInfo } from './support.js';

export type Platform = 'express' | 'fastify';
export const PLATFORMS: readonly Platform[] = ['express', 'fastify'];

/** A running application and where it listens. */
export interface Running {
  readonly app: INestApplication;
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Starts a root module on the platform, without Nest's logger, on a free loopback port, with the
 * suites' exception filter (refusals as `slow down` when asked).
 */
export async function start(platform: Platform, root: Type, slowDown = false): Promise<Running> {
  const app =
    platform === 'express'
      ? await NestFactory.create(root, { logger: false, abortOnError: false })
      : await NestFactory.create(root, new FastifyAdapter(), { logger: false, abortOnError: false });
  // Before listening: Nest binds global filters to the routes when it starts.
  app.useGlobalFilters(new SuiteErrors(app.getHttpAdapter(), slowDown));
  await app.listen(0, '127.0.0.1');
  const { port } = app.getHttpServer().address() as AddressInfo;
  return { app, url: `http://127.0.0.1:${port}`, close: () => app.close() };
}

/**
 * Errors as the suites read them: a refusal through Nest's own filter (or as `slow down`, when the
 * scenario asks for a denial handler), other HttpExceptions as Nest sends them, anything else as
 * 500 with the SluiceError's code.
 */
@Catch()
export class SuiteErrors extends BaseExceptionFilter {
  readonly #server: HttpServer;
  readonly #slowDown: boolean;

  constructor(server: HttpServer, slowDown = false) {
    super(server);
    this.#server = server;
    this.#slowDown = slowDown;
  }

  override catch(exception: unknown, host: ArgumentsHost): void {
    const response: unknown = host.switchToHttp().getResponse();
    if (exception instanceof RateLimitException && this.#slowDown) {
      // A filter of the application's: the refusal's headers are on the reply already; it sends its own body.
      this.#server.setHeader(response, 'Content-Type', 'text/plain');
      this.#server.reply(response, 'slow down', exception.getStatus());
      return;
    }
    if (exception instanceof HttpException) {
      super.catch(exception, host);
      return;
    }
    this.#server.reply(response, errorCode(exception), 500);
  }
}

@Controller()
class ConformanceController {
  constructor(private readonly sluice: SluiceService) {}

  @Get('ok')
  ok(): string {
    return 'ok';
  }

  @Get('fail')
  fail(): never {
    throw new HttpException('no', 401);
  }

  @Get('health')
  health(): string {
    return 'up';
  }

  @Get('stream')
  stream(): StreamableFile {
    return new StreamableFile(Readable.from(STREAMED.map((chunk) => Buffer.from(chunk))), {
      type: 'text/plain',
    });
  }

  @Get('info')
  @Header('Content-Type', 'application/json')
  info(@RateLimitDecision() info: RateLimitInfo | undefined): string {
    return describeInfo(info);
  }

  @Get('admin/key')
  async key(@Req() req: NestHttpRequest): Promise<string> {
    return (await this.sluice.clientKey(req)) ?? '(none)';
  }

  @Get('admin/reset')
  async reset(@Req() req: NestHttpRequest): Promise<string> {
    await this.sluice.resetKey(req);
    return 'reset';
  }
}

function headerOf(request: NestHttpRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The conformance app on a platform: the module's options from the scenario, SluiceGuard for every route. */
export const buildNest =
  (platform: Platform): Build =>
  async (scenario) => {
    const options: SluiceModuleOptions = commonOptions<NestHttpRequest>(
      scenario,
      headerOf,
      (request) => request.url.split('?')[0] ?? '/',
    );

    @Module({
      imports: [SluiceModule.forRoot(options)],
      controllers: [ConformanceController],
      providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
    })
    class ConformanceModule {}

    const running = await start(platform, ConformanceModule, scenario.customDenial === true);
    running.app.useGlobalFilters(
      new SuiteErrors(running.app.getHttpAdapter(), scenario.customDenial === true),
    );
    return {
      key: '127.0.0.1',
      send: supertestSend(running.url),
      close: () => running.close(),
    };
  };
