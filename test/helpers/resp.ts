// One command to one server over a fresh socket, for rigs that poll nodes which may be down.
import { createConnection } from 'node:net';

export type Reply = string | number | null | Error | Reply[];

/** Parses one RESP2 reply from `text` at `at`; undefined when more bytes are needed. */
function parse(text: string, at: number): { value: Reply; end: number } | undefined {
  const lineEnd = text.indexOf('\r\n', at);
  if (lineEnd === -1) return undefined;
  const type = text[at];
  const line = text.slice(at + 1, lineEnd);
  const next = lineEnd + 2;
  if (type === '+') return { value: line, end: next };
  if (type === '-') return { value: new Error(line), end: next };
  if (type === ':') return { value: Number(line), end: next };
  if (type === '$') {
    const length = Number(line);
    if (length === -1) return { value: null, end: next };
    // Lengths are in bytes: measure on a Buffer so multi-byte text is not cut short.
    const rest = Buffer.from(text.slice(next), 'utf8');
    if (rest.length < length + 2) return undefined;
    const value = rest.subarray(0, length).toString('utf8');
    return { value, end: next + value.length + 2 };
  }
  if (type === '*') {
    const count = Number(line);
    if (count === -1) return { value: null, end: next };
    const items: Reply[] = [];
    let cursor = next;
    for (let i = 0; i < count; i++) {
      const item = parse(text, cursor);
      if (item === undefined) return undefined;
      items.push(item.value);
      cursor = item.end;
    }
    return { value: items, end: cursor };
  }
  throw new Error(`Unexpected RESP type ${JSON.stringify(type)}`);
}

function encode(args: readonly (string | number)[]): string {
  let out = `*${args.length}\r\n`;
  for (const arg of args) {
    const text = String(arg);
    out += `$${Buffer.byteLength(text)}\r\n${text}\r\n`;
  }
  return out;
}

/**
 * Sends one command to 127.0.0.1:`port` and resolves with its reply (a Redis error reply resolves
 * as an Error value). Rejects when the server cannot be reached or does not answer in `timeoutMs`.
 */
export function redisCommand(
  port: number,
  args: readonly (string | number)[],
  timeoutMs = 2000,
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: '127.0.0.1', port });
    let data = '';
    socket.setTimeout(timeoutMs);
    socket.setEncoding('utf8');
    socket.on('connect', () => socket.write(encode(args)));
    socket.on('data', (chunk: string) => {
      data += chunk;
      const reply = parse(data, 0);
      if (reply !== undefined) {
        socket.destroy();
        resolve(reply.value);
      }
    });
    socket.on('error', (error) => {
      socket.destroy();
      reject(error);
    });
    socket.on('timeout', () => {
      socket.destroy();
      reject(new Error(`127.0.0.1:${port} did not answer ${String(args[0])} within ${timeoutMs} ms`));
    });
    socket.on('close', () => reject(new Error(`127.0.0.1:${port} closed the connection`)));
  });
}

/** `INFO`-style `field:value` lines as a record. */
export function infoFields(text: Reply): Record<string, string> {
  const fields: Record<string, string> = {};
  if (typeof text !== 'string') return fields;
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1);
  }
  return fields;
}

/** Polls `check` until it returns a value other than undefined, or throws after `timeoutMs`. */
export async function pollUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 20_000,
  intervalMs = 25,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `Timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
