// The IETF `pk` parameter: a keyed hash of the client's key, so clients can tell partitions apart and nobody can read an address.
import { createHmac, randomBytes } from 'node:crypto';
import { invalidOption } from '../errors.js';

/** Bytes of the hash sent; 12 bytes (16 base64 characters) tell partitions apart without a long field. */
const PARTITION_KEY_BYTES = 12;

/**
 * `true`: a secret made once per process (the same key gives the same `pk` in this process, on
 * every route). `{ secret }`: your secret, the same in every process of a fleet.
 */
export type PartitionKeyOption = boolean | { readonly secret: string | Uint8Array };

let processSecret: Uint8Array | undefined;

/** The hasher for the `partitionKey` option, or `undefined` when `pk` is not wanted. */
export function partitionKeyHasher(option: unknown): ((key: string) => Uint8Array) | undefined {
  if (option === undefined || option === false) return undefined;
  let secret: string | Uint8Array;
  if (option === true) {
    processSecret ??= randomBytes(32);
    secret = processSecret;
  } else {
    const given =
      typeof option === 'object' && option !== null ? (option as { secret?: unknown }).secret : undefined;
    const valid =
      (typeof given === 'string' && given.length >= 16) ||
      (given instanceof Uint8Array && given.length >= 16);
    if (!valid || Object.keys(option as object).some((name) => name !== 'secret')) {
      throw invalidOption(
        'partitionKey',
        'true, false, or { secret } with a secret of at least 16 characters or bytes',
        option,
      );
    }
    secret = given as string | Uint8Array;
  }
  // An unkeyed hash of an IPv4 address is undone by trying all 2^32 of them; a keyed one is not.
  return (key) => createHmac('sha256', secret).update(key).digest().subarray(0, PARTITION_KEY_BYTES);
}
