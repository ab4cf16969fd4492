// Concurrency limits through NestJS's guard, on Express and on Fastify: the behaviour every adapter shows.
import { Controller, Get, Module, Param } from '@nestjs/common';
import { APP_GUARD } from '@nestjs/core';
import { SluiceGuard, SluiceModule } from '../../../src/http/adapters/nestjs.js';
import { headerKey } from '../../../src/http/client-key.js';
import type { Holder, LeaseBuild } from '../../helpers/http/lease-apps.js';
import { leaseConformance } from '../../helpers/http/lease-conformance.js';
import { PLATFORMS, type Platform, start } from '../../helpers/http/nestjs.js';

/** The handlers' holder, per application: Nest makes the controller, so it finds the holder here. */
let current: Holder | undefined;

@Controller()
class LeaseController {
  @Get('now')
  now(): string {
    return 'ok';
  }

  @Get('hold/:id')
  async hold(@Param('id') id: string): Promise<string> {
    const holder = current as Holder;
    holder.entered(id);
    await holder.hold(id);
    return 'ok';
  }
}

const buildNest =
  (platform: Platform): LeaseBuild =>
  async (options, holder) => {
    current = holder;
    @Module({
      imports: [SluiceModule.forRoot({ ...options, key: headerKey('x-client') })],
      controllers: [LeaseController],
      providers: [{ provide: APP_GUARD, useClass: SluiceGuard }],
    })
    class LeaseModule {}
    const running = await start(platform, LeaseModule);
    return { url: running.url, close: () => running.close() };
  };

for (const platform of PLATFORMS) leaseConformance(`nestjs (${platform})`, buildNest(platform));
