// The guard's metrics on the service's prom-client registry: refusals by protocol, the limit, calls in flight and waiting.
import type { Registry } from 'prom-client';
import type { ServiceGuard } from './guard.js';

type PromClient = typeof import('prom-client');

/** Registers the guard's metrics; each is read from the guard when scraped, so a call pays nothing for them. */
export async function registerGuardMetrics(guard: ServiceGuard, registry: Registry): Promise<void> {
  const loaded = (await import('prom-client')) as PromClient & { default?: PromClient };
  const client = loaded.Gauge === undefined && loaded.default ? loaded.default : loaded;
  new client.Counter({
    name: 'sluice_service_shed_total',
    help: 'Calls the service refused because it was overloaded (gRPC RESOURCE_EXHAUSTED, HTTP 503), by protocol; never counted as store failures.',
    labelNames: ['protocol'],
    registers: [registry],
    collect() {
      const { refused } = guard.stats();
      this.reset();
      this.inc({ protocol: 'grpc' }, refused.grpc);
      this.inc({ protocol: 'http' }, refused.http);
    },
  });
  const gauge = (name: string, help: string, read: () => number): void => {
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  gauge(
    'sluice_service_shed_limit',
    "The guard's concurrency limit now, as latency moved it.",
    () => guard.stats().limit,
  );
  gauge(
    'sluice_service_shed_in_flight',
    'Calls the guard admitted that are not answered yet.',
    () => guard.stats().inFlight,
  );
  gauge('sluice_service_shed_queued', 'Calls waiting for room now.', () => guard.stats().queued);
}
