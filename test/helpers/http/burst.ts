// Sends many HTTP requests at once to a server on this machine, each on its own connection, and collects the answers.
import { Agent, request } from 'node:http';

export interface BurstReply {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: string;
}

/** One GET, on a connection of its own. */
function get(url: string, headers: Readonly<Record<string, string>>, agent: Agent): Promise<BurstReply> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { headers, agent }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => {
        body += chunk;
      });
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body }),
      );
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.end();
  });
}

/**
 * Sends `count` GETs to `url` without waiting for any answer first (every one is in flight before
 * the first reply is read), and resolves with every reply in the order sent.
 */
export async function burst(
  url: string,
  count: number,
  headers: Readonly<Record<string, string>> = {},
): Promise<BurstReply[]> {
  const agent = new Agent({ keepAlive: false, maxSockets: Number.POSITIVE_INFINITY });
  try {
    return await Promise.all(Array.from({ length: count }, () => get(url, headers, agent)));
  } finally {
    agent.destroy();
  }
}

/** How many replies had each status, e.g. `{ 200: 100, 429: 400 }`. */
export function statusCounts(replies: readonly BurstReply[]): Record<number, number> {
  const counts: Record<number, number> = {};
  for (const { status } of replies) counts[status] = (counts[status] ?? 0) + 1;
  return counts;
}
