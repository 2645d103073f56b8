import { describe, expect, it } from 'vitest';
import { toApp } from '../../src/storage/repos/apps.js';
import type { AppRow } from '../../src/storage/schema.js';
import { sameMap } from '../helpers/v8-natives.js';

// docs/adr/0011-hot-path-object-shapes.md: on Node 20 an object whose properties follow an object spread
// gets a hidden class (map) of its own on every call once the spread's inline cache has warmed up,
// which cost ~14 µs per app row and left every reader of apps megamorphic. The app a grant reads must
// keep one map however many are built.
const row = (i: number): AppRow => ({
  id: `app_${i}`,
  developer_id: 'dev_1',
  name: `App ${i}`,
  type: 'confidential',
  client_secret_hash: null,
  redirect_uris: '["https://app.example/cb"]',
  allowed_origins: '[]',
  feature_auth: 1,
  feature_profile: i % 2,
  required_fields: '[]',
  mfa: 'off',
  logo_url: null,
  logo_url_dark: null,
  accent_color: null,
  default_locale: null,
  backchannel_logout_uri: null,
  backchannel_logout_session_required: 0,
  password_min_length: 8,
  password_character_classes: 0,
  password_max_age_days: null,
  password_history_count: 0,
  mail_reply_to: null,
  mail_overrides: '{}',
  disabled: 0,
  created_at: i,
  updated_at: i,
  dpop_bound_access_tokens: 0,
  require_pushed_authorization_requests: 0, device_authorization_grant: 0,
  resource_uris: '[]',
  client_credentials: 0,
  client_credentials_scopes: '',
  client_credentials_not_before: null,
});

describe('objects built on hot paths', () => {
  it('toApp gives every app the same hidden class, after its callers have warmed up', () => {
    for (let i = 0; i < 5000; i += 1) toApp(row(i));
    expect(sameMap(toApp(row(1)), toApp(row(2)))).toBe(true);
  });
});
