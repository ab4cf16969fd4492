// Keys a Redis server expired, seen through keyspace notifications. The differential suites replay
// timelines with their own clock while Redis expires keys in real time: on a busy machine a key can
// expire on the server while the twin, on the test clock, still counts on it. This tells such an
// artifact apart from a real disagreement between the twins.
import { Redis } from 'ioredis';

export interface ExpiryWatch {
  /** Keys expired by the server since they were last cleared. */
  readonly expired: ReadonlySet<string>;
  /** Waits until notifications sent so far have arrived (one round trip on the subscriber's server). */
  settle(): Promise<void>;
  clear(key: string): void;
  close(): Promise<void>;
}

export async function watchExpiries(port: number): Promise<ExpiryWatch> {
  const admin = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  const subscriber = new Redis({ port, host: '127.0.0.1', lazyConnect: true });
  await admin.connect();
  await subscriber.connect();
  await admin.config('SET', 'notify-keyspace-events', 'Ex');
  const expired = new Set<string>();
  subscriber.on('pmessage', (_pattern: string, _channel: string, key: string) => expired.add(key));
  await subscriber.psubscribe('__keyevent@*__:expired');
  return {
    expired,
    settle: async () => {
      // A PING on the subscribed connection is answered after the messages queued before it.
      await subscriber.ping();
    },
    clear: (key) => {
      expired.delete(key);
    },
    close: async () => {
      subscriber.disconnect();
      admin.disconnect();
    },
  };
}
