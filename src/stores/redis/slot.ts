// Redis Cluster hash slots (CRC16/XMODEM of the hash tag, mod 16384), to batch only keys of one slot.

const TABLE = new Uint16Array(256);
for (let i = 0; i < 256; i++) {
  let crc = i << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  TABLE[i] = crc;
}

/** The part of a key that Redis Cluster hashes: the first non-empty `{...}`, else the whole key. */
export function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  if (close === -1 || close === open + 1) return key;
  return key.slice(open + 1, close);
}

/** The cluster slot of a key, as `CLUSTER KEYSLOT` computes it. */
export function keySlot(key: string): number {
  const bytes = Buffer.from(hashTag(key), 'utf8');
  let crc = 0;
  for (const byte of bytes) crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc % 16384;
}
