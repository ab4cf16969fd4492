// Who may see the dashboard and /metrics: anyone on loopback, otherwise only with the admin token.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { BlockList, isIPv6 } from 'node:net';
import { CliError } from '../cli/errors.js';

/** The shortest admin token accepted: anything shorter can be guessed over the network. */
export const MIN_TOKEN_LENGTH = 16;

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/**
 * Whether an address the server is bound to is reachable from this machine only: 127.0.0.0/8, ::1,
 * and the same written as IPv4-mapped IPv6 (::ffff:127.0.0.1). The wildcards 0.0.0.0 and :: listen
 * on every interface, so they are not.
 */
export function isLoopbackAddress(address: string): boolean {
  // BlockList matches an IPv4-mapped IPv6 address against the IPv4 rules.
  return LOOPBACK.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
}

/** Checks an admin token given on the command line or in the environment. */
export function checkAdminToken(token: string, source: string): string {
  if (token.length < MIN_TOKEN_LENGTH || /\s/.test(token)) {
    throw new CliError(
      `Expected ${source} to be at least ${MIN_TOKEN_LENGTH} characters without spaces, got ${token.length === 0 ? 'an empty value' : `${token.length} characters`}; make one with: openssl rand -hex 24`,
    );
  }
  return token;
}

const digest = (text: string): Buffer => createHash('sha256').update(text).digest();

/** The token presented with `Authorization: Bearer <token>` or as the password of Basic authentication. */
function presentedToken(request: IncomingMessage): string | undefined {
  const header = request.headers.authorization;
  if (header === undefined) return undefined;
  const space = header.indexOf(' ');
  if (space === -1) return undefined;
  const scheme = header.slice(0, space).toLowerCase();
  const value = header.slice(space + 1).trim();
  if (scheme === 'bearer') return value;
  if (scheme !== 'basic') return undefined;
  // Browsers ask for Basic credentials themselves: any user name, the token as the password.
  const decoded = Buffer.from(value, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon === -1 ? undefined : decoded.slice(colon + 1);
}

/** What the admin routes answer a request: go ahead, or a refusal with its reason. */
export type AccessVerdict =
  | { readonly ok: true }
  | { readonly ok: false; readonly status: 401 | 403; readonly detail: string };

/**
 * The admin routes' gate. It starts closed and opens once `listening` says where the server is
 * bound: on loopback, to anyone (unless a token is configured); beyond it, only with the token.
 */
export class AdminAccess {
  readonly #tokenDigest: Buffer | undefined;
  #address: string | undefined;

  constructor(token: string | undefined) {
    // Digests of equal length, so timingSafeEqual compares without revealing the token's length.
    this.#tokenDigest = token === undefined ? undefined : digest(token);
  }

  /** Whether a token is configured. */
  get hasToken(): boolean {
    return this.#tokenDigest !== undefined;
  }

  /** The server is listening on `address`. */
  listening(address: string): void {
    this.#address = address;
  }

  /** Whether the admin routes are off: bound beyond loopback with no token to ask for. */
  get off(): boolean {
    return (
      this.#tokenDigest === undefined && (this.#address === undefined || !isLoopbackAddress(this.#address))
    );
  }

  check(request: IncomingMessage): AccessVerdict {
    if (this.#tokenDigest === undefined) {
      if (!this.off) return { ok: true };
      return {
        ok: false,
        status: 403,
        detail: `The dashboard and /metrics are off: this service listens beyond loopback (${this.#address ?? 'not yet bound'}) and no admin token is configured. Start it with SLUICE_ADMIN_TOKEN set (or --admin-token) to turn them on.`,
      };
    }
    const token = presentedToken(request);
    if (token !== undefined && timingSafeEqual(digest(token), this.#tokenDigest)) return { ok: true };
    return {
      ok: false,
      status: 401,
      detail:
        'The dashboard and /metrics need the admin token: send it as "Authorization: Bearer <token>" (or as the password of Basic authentication, which a browser asks for).',
    };
  }
}
