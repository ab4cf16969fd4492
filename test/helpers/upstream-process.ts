// The local upstream in a process of its own (forked by helpers/fleet.ts), so that whatever the suite's
// own process does meanwhile (MONITOR, workers' messages) never delays the arrivals it stamps.
import { startUpstream, type UpstreamOptions } from './upstream.js';

type Message = { type: 'start'; options: UpstreamOptions } | { type: 'stop' };

let stop: (() => Promise<void>) | undefined;
process.on('message', async (message: Message) => {
  if (message.type === 'start') {
    const upstream = await startUpstream(message.options);
    stop = async () => {
      const arrivals = [...upstream.arrivals];
      await upstream.close();
      process.send?.({ arrivals }, () => process.exit(0));
    };
    process.send?.({ url: upstream.url });
  } else if (message.type === 'stop') {
    await stop?.();
  }
});
