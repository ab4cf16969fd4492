// Client keys: address parsing and grouping, trusted proxies by hops and by ranges, spoofing, headers, bad options.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clientIp, headerKey } from '../../src/http/client-key.js';
import { addressKey, cidrContains, formatAddress, parseAddress, parseCidr } from '../../src/http/ip.js';
import type { RequestView } from '../../src/http/view.js';
import { SluiceError } from '../../src/index.js';

function view(remoteAddress: string | undefined, headers: Record<string, string> = {}): RequestView {
  return { method: 'GET', path: '/', remoteAddress, header: (name) => headers[name] };
}

describe('addresses', () => {
  it('parses, unwraps IPv4-mapped IPv6 and prints RFC 5952 text', () => {
    assert.equal(formatAddress(parseAddress('::ffff:192.0.2.1') as never), '192.0.2.1');
    assert.equal(formatAddress(parseAddress('::FFFF:c000:0201') as never), '192.0.2.1');
    assert.equal(formatAddress(parseAddress('2001:DB8:0:0:0:0:2:1') as never), '2001:db8::2:1');
    assert.equal(formatAddress(parseAddress('2001:db8:0:0:1:0:0:1') as never), '2001:db8::1:0:0:1');
    assert.equal(formatAddress(parseAddress('fe80::1%eth0') as never), 'fe80::1');
    assert.equal(formatAddress(parseAddress('::') as never), '::');
    for (const bad of ['unknown', '1.2.3', '1.2.3.4:80', '[::1]', '', '2001:db8::g', '01.2.3.4']) {
      assert.equal(parseAddress(bad), undefined, bad);
    }
  });

  it('groups IPv6 by prefix: two addresses of one /56 share a key, the next /56 does not', () => {
    const key = (text: string, prefix = 56) => addressKey(parseAddress(text) as never, 32, prefix);
    assert.equal(key('2001:db8:abcd:1200::1'), '2001:db8:abcd:1200::/56');
    assert.equal(key('2001:db8:abcd:12ff:ffff:ffff:ffff:ffff'), '2001:db8:abcd:1200::/56');
    assert.equal(key('2001:db8:abcd:1300::1'), '2001:db8:abcd:1300::/56');
    assert.equal(key('2001:db8:abcd:12ff::1', 64), '2001:db8:abcd:12ff::/64');
    assert.equal(key('2001:db8::1', 128), '2001:db8::1');
    assert.equal(addressKey(parseAddress('198.51.100.77') as never, 24, 56), '198.51.100.0/24');
  });

  it('matches CIDR ranges, including mapped forms', () => {
    const range = parseCidr('10.0.0.0/8');
    assert.ok(range !== undefined);
    assert.ok(cidrContains(range, parseAddress('10.200.3.4') as never));
    assert.ok(cidrContains(range, parseAddress('::ffff:10.1.1.1') as never));
    assert.ok(!cidrContains(range, parseAddress('11.0.0.1') as never));
    assert.ok(cidrContains(parseCidr('::ffff:10.0.0.0/104') as never, parseAddress('10.9.9.9') as never));
    assert.ok(cidrContains(parseCidr('fc00::/7') as never, parseAddress('fd12::1') as never));
    assert.ok(!cidrContains(parseCidr('fc00::/7') as never, parseAddress('10.0.0.1') as never));
    for (const bad of ['10.0.0.0/33', '10.0.0.0/', '10.0.0.0/x', 'nope', '::/129', '::ffff:0:0/95']) {
      assert.equal(parseCidr(bad), undefined, bad);
    }
  });
});

describe('clientIp', () => {
  it('with no trusted proxy, a client sending X-Forwarded-For: 1.2.3.4 keeps its socket address', () => {
    const key = clientIp();
    assert.equal(key.extract(view('203.0.113.5', { 'x-forwarded-for': '1.2.3.4' })), '203.0.113.5');
    assert.equal(key.extract(view('203.0.113.5', { forwarded: 'for=1.2.3.4' })), '203.0.113.5');
    assert.equal(
      key.extract(view('::ffff:203.0.113.5')),
      '203.0.113.5',
      'a dual-stack socket counts as IPv4',
    );
  });

  it('with one trusted hop, the right-most address (what the proxy appended) is the client', () => {
    const key = clientIp({ trustProxy: 1 });
    assert.equal(
      key.extract(view('10.0.0.2', { 'x-forwarded-for': '1.2.3.4, 198.51.100.7' })),
      '198.51.100.7',
    );
    assert.equal(key.extract(view('10.0.0.2', { 'x-forwarded-for': '198.51.100.7' })), '198.51.100.7');
    assert.equal(key.extract(view('10.0.0.2')), '10.0.0.2', 'no header: the peer itself');
    const two = clientIp({ trustProxy: 2 });
    assert.equal(
      two.extract(view('10.0.0.2', { 'x-forwarded-for': '1.2.3.4, 198.51.100.7, 10.0.0.1' })),
      '198.51.100.7',
    );
    assert.equal(two.extract(view('10.0.0.2', { 'x-forwarded-for': '198.51.100.7' })), '198.51.100.7');
  });

  it('with trusted ranges, the right-most untrusted address is the client; an untrusted peer is never skipped', () => {
    const key = clientIp({ trustProxy: ['10.0.0.0/8', '192.168.1.1'] });
    const chain = { 'x-forwarded-for': '1.2.3.4, 198.51.100.7, 10.9.9.9, 192.168.1.1' };
    assert.equal(key.extract(view('10.0.0.2', chain)), '198.51.100.7');
    assert.equal(key.extract(view('203.0.113.5', chain)), '203.0.113.5', 'a direct client cannot spoof');
    assert.equal(key.extract(view('10.0.0.2', { 'x-forwarded-for': '10.1.1.1, 10.2.2.2' })), '10.1.1.1');
  });

  it('an unparsable claim where the client should be gives no key, never another address', () => {
    assert.equal(
      clientIp({ trustProxy: 1 }).extract(view('10.0.0.2', { 'x-forwarded-for': '198.51.100.7, garbage' })),
      undefined,
    );
    assert.equal(
      clientIp({ trustProxy: ['10.0.0.0/8'] }).extract(view('10.0.0.2', { 'x-forwarded-for': 'unknown' })),
      undefined,
    );
    assert.equal(clientIp().extract(view(undefined)), undefined);
    assert.equal(clientIp().extract(view('not an address')), undefined);
  });

  it('reads ports and brackets as proxies write them', () => {
    const key = clientIp({ trustProxy: 1, ipv6Prefix: 128 });
    assert.equal(key.extract(view('10.0.0.2', { 'x-forwarded-for': '198.51.100.7:5123' })), '198.51.100.7');
    assert.equal(key.extract(view('10.0.0.2', { 'x-forwarded-for': '[2001:db8::7]:443' })), '2001:db8::7');
    assert.equal(key.extract(view('10.0.0.2', { 'x-forwarded-for': '2001:db8::7' })), '2001:db8::7');
  });

  it('parses Forwarded (RFC 7239): quoted IPv6 with port, several elements, obfuscated nodes', () => {
    const key = clientIp({ trustProxy: 1, proxyHeader: 'forwarded' });
    const forwarded = 'for=192.0.2.43;proto=http, for="[2001:db8:cafe::17]:4711";by=203.0.113.60';
    assert.equal(key.extract(view('10.0.0.2', { forwarded })), '2001:db8:cafe::/56');
    assert.equal(key.extract(view('10.0.0.2', { forwarded: 'For="192.0.2.43:8080"' })), '192.0.2.43');
    assert.equal(key.extract(view('10.0.0.2', { forwarded: 'for=_hidden' })), undefined);
    assert.equal(key.extract(view('10.0.0.2', { forwarded: 'proto=https' })), undefined);
    assert.equal(
      key.extract(view('10.0.0.2', { 'x-forwarded-for': '198.51.100.7' })),
      '10.0.0.2',
      'X-Forwarded-For is ignored when Forwarded is the configured header',
    );
  });

  it('IPv6 clients in one /56 share a key', () => {
    const key = clientIp();
    const a = key.extract(view('2001:db8:1:ab00::1'));
    const b = key.extract(view('2001:db8:1:abff:1234:5678:9abc:def0'));
    const c = key.extract(view('2001:db8:1:ac00::1'));
    assert.equal(a, b);
    assert.notEqual(a, c);
  });

  it('rejects bad options with a SluiceError naming the option', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ trustProxy: -1 }, /`trustProxy`/],
      [{ trustProxy: true }, /`trustProxy`/],
      [{ trustProxy: ['10.0.0.0/33'] }, /`trustProxy\[0\]`.*10\.0\.0\.0\/33/],
      [{ trustProxy: [42] }, /`trustProxy\[0\]`/],
      [{ ipv6Prefix: 0 }, /`ipv6Prefix`/],
      [{ ipv4Prefix: 33 }, /`ipv4Prefix`/],
      [{ proxyHeader: 'x-real-ip' }, /`proxyHeader`/],
      [{ trustproxy: 1 }, /Unknown option `clientIp.trustproxy`/],
    ];
    for (const [options, message] of cases) {
      assert.throws(
        () => clientIp(options as never),
        (error: unknown) =>
          error instanceof SluiceError &&
          error.code === 'ERR_SLUICE_INVALID_OPTION' &&
          message.test(error.message),
      );
    }
  });
});

describe('headerKey', () => {
  it('reads a trimmed header; empty or absent is no key', () => {
    const key = headerKey('X-API-Key');
    assert.equal(key.extract(view(undefined, { 'x-api-key': '  k-123 ' })), 'k-123');
    assert.equal(key.extract(view(undefined, { 'x-api-key': '   ' })), undefined);
    assert.equal(key.extract(view(undefined)), undefined);
    assert.throws(() => headerKey('bad header'), SluiceError);
  });
});

describe('proxy warnings', () => {
  const diagnose = (key: ReturnType<typeof clientIp>, request: RequestView) => key.diagnose?.(request)?.code;

  it('no proxy trusted: a private, loopback or link-local peer sending a proxy header is suspicious', () => {
    const key = clientIp();
    assert.equal(
      diagnose(key, view('10.0.0.4', { 'x-forwarded-for': '198.51.100.7' })),
      'SLUICE_FORWARDED_UNTRUSTED',
    );
    assert.equal(
      diagnose(key, view('fd00::4', { forwarded: 'for=198.51.100.7' })),
      'SLUICE_FORWARDED_UNTRUSTED',
    );
    assert.equal(
      diagnose(key, view('::ffff:127.0.0.1', { 'x-forwarded-for': '1.2.3.4' })),
      'SLUICE_FORWARDED_UNTRUSTED',
    );
    assert.equal(
      diagnose(key, view('169.254.1.1', { 'x-forwarded-for': '1.2.3.4' })),
      'SLUICE_FORWARDED_UNTRUSTED',
    );
  });

  it('no proxy trusted: a public peer sending the header is a client trying its luck, not a misconfiguration', () => {
    const key = clientIp();
    assert.equal(diagnose(key, view('198.51.100.9', { 'x-forwarded-for': '1.2.3.4' })), undefined);
    assert.equal(diagnose(key, view('10.0.0.4')), undefined, 'no header, nothing to say');
    assert.equal(diagnose(key, view('10.0.0.4', { 'x-forwarded-for': '  ' })), undefined);
    assert.equal(diagnose(key, view(undefined, { 'x-forwarded-for': '1.2.3.4' })), undefined);
  });

  it('hops: fewer addresses than trusted proxies warn; enough do not; trusted ranges are never judged', () => {
    const two = clientIp({ trustProxy: 2 });
    assert.equal(
      diagnose(two, view('10.0.0.4', { 'x-forwarded-for': '1.2.3.4' })),
      'SLUICE_PROXY_HOPS_MISSING',
    );
    assert.equal(diagnose(two, view('10.0.0.4')), 'SLUICE_PROXY_HOPS_MISSING');
    assert.equal(diagnose(two, view('10.0.0.4', { 'x-forwarded-for': '1.2.3.4, 10.0.0.9' })), undefined);
    const forwarded = clientIp({ trustProxy: 1, proxyHeader: 'forwarded' });
    assert.equal(
      diagnose(forwarded, view('10.0.0.4', { 'x-forwarded-for': '1.2.3.4' })),
      'SLUICE_PROXY_HOPS_MISSING',
    );
    assert.equal(diagnose(forwarded, view('10.0.0.4', { forwarded: 'for=1.2.3.4' })), undefined);
    const ranges = clientIp({ trustProxy: ['loopback'] });
    assert.equal(diagnose(ranges, view('127.0.0.1')), undefined);
  });
});
