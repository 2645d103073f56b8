import { describe, expect, it } from 'vitest';
import { deviceOf, ipArea } from '../../src/shared/ip-area.js';
import { device } from '../../src/sessions/service.js';

/** The coarse network area and the device shown in the sessions list (docs/account/sessions.md): never the full address. */
describe('ipArea', () => {
  it.each([
    ['203.0.113.7', '203.0.113.x'],
    ['::ffff:198.51.100.23', '198.51.100.x'],
    ['2001:db8:1234:5678::9', '2001:db8:1234::/48'],
    ['2001:0db8:0001:ffff:0:0:0:1', '2001:db8:1::/48'],
    ['2001:db8::1', '2001:db8:0::/48'],
    ['fe80::1%eth0', 'fe80:0:0::/48'],
    ['::ffff:c633:6417', '0:0:0::/48'],
    ['not an address', null],
    ['', null],
    [null, null],
  ])('%s → %s', (ip, area) => {
    expect(ipArea(ip)).toBe(area);
  });

  it('keeps at most 512 characters of a user agent', () => {
    expect(deviceOf({ ip: '203.0.113.7', userAgent: 'x'.repeat(600) })).toEqual({ userAgent: 'x'.repeat(512), ipArea: '203.0.113.x' });
  });
});

describe('device', () => {
  it('names browser, system and device type from the user agent, nulls when unknown', () => {
    expect(device('Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1')).toEqual({ browser: 'Safari', os: 'iOS', deviceType: 'mobile' });
    expect(device(null)).toEqual({ browser: null, os: null, deviceType: null });
    expect(device('lightMyRequest')).toEqual({ browser: null, os: null, deviceType: null });
  });
});
