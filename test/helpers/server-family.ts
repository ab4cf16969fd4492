// Which server the suites start: Redis (the default) or Valkey, chosen by SLUICE_TEST_SERVER.

/** The binaries of one server family; resolved on PATH (`npm test` puts Valkey's private folder there). */
export interface ServerFamily {
  /** `redis` or `valkey`. */
  readonly name: 'redis' | 'valkey';
  /** As the server's INFO names itself in banners: `Redis`, `Valkey`. */
  readonly label: 'Redis' | 'Valkey';
  readonly server: string;
  readonly sentinel: string;
  readonly cli: string;
  /** How to get the binaries when they are missing. */
  readonly install: string;
}

const FAMILIES: Readonly<Record<'redis' | 'valkey', ServerFamily>> = {
  redis: {
    name: 'redis',
    label: 'Redis',
    server: 'redis-server',
    sentinel: 'redis-sentinel',
    cli: 'redis-cli',
    install: 'run .ci/run, or apt-get install redis-server redis-sentinel redis-tools',
  },
  valkey: {
    name: 'valkey',
    label: 'Valkey',
    server: 'valkey-server',
    sentinel: 'valkey-sentinel',
    cli: 'valkey-cli',
    install:
      'run the tests with `SLUICE_TEST_SERVER=valkey npm test`, which unpacks Valkey with scripts/ensure-valkey.sh and puts it on PATH',
  },
};

function chosen(): ServerFamily {
  const value = process.env.SLUICE_TEST_SERVER;
  if (value === undefined || value === '' || value === 'redis') return FAMILIES.redis;
  if (value === 'valkey') return FAMILIES.valkey;
  throw new Error(`Expected SLUICE_TEST_SERVER to be 'redis' or 'valkey', got '${value}'.`);
}

/** The server family of this test run (SLUICE_TEST_SERVER=redis|valkey, default redis). */
export const SERVER_FAMILY: ServerFamily = chosen();
