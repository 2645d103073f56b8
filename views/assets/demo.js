// Gatehouse /demo: a minimal public client (authorization code + PKCE S256) that runs in the browser.
// The PKCE verifier, state and nonce live in sessionStorage only for the round trip.
(() => {
  'use strict';
  const KEY = 'gatehouse-demo';
  const $ = (id) => document.getElementById(id);
  const b64url = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const random = (n) => b64url(crypto.getRandomValues(new Uint8Array(n)));
  const show = (id, value) => { $(id).textContent = typeof value === 'string' ? value : JSON.stringify(value, null, 2); };
  const fail = (message) => { show('demo-error', message); const s = $('demo-status'); if (s) s.hidden = true; };
  const decode = (jwt) => {
    const [h, p] = jwt.split('.');
    const json = (part) => JSON.parse(decodeURIComponent(escape(atob(part.replace(/-/g, '+').replace(/_/g, '/')))));
    return { header: json(h), payload: json(p) };
  };

  async function start(cfg) {
    const verifier = random(48);
    const state = random(16);
    const nonce = random(16);
    const challenge = b64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
    sessionStorage.setItem(KEY, JSON.stringify({ verifier, state, nonce, clientId: cfg.clientId, redirectUri: cfg.redirectUri }));
    const url = new URL(cfg.authorizeEndpoint);
    url.search = new URLSearchParams({
      response_type: 'code',
      client_id: cfg.clientId,
      redirect_uri: cfg.redirectUri,
      scope: 'openid profile email offline_access',
      state,
      nonce,
      code_challenge: challenge,
      code_challenge_method: 'S256',
    }).toString();
    location.assign(url.toString());
  }

  async function tokenRequest(endpoint, params) {
    const res = await fetch(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(params).toString(),
    });
    const body = await res.json();
    if (!res.ok) throw new Error(`${body.error}: ${body.error_description}`);
    return body;
  }

  async function showTokens(cfg, tx, tokens) {
    show('demo-tokens', tokens);
    if (tokens.id_token) {
      const idt = decode(tokens.id_token);
      show('demo-id-token', idt);
      if (tx.nonce && idt.payload.nonce !== tx.nonce) fail('The ID token nonce does not match.');
    }
    show('demo-access-token', decode(tokens.access_token));
    const res = await fetch(cfg.userinfoEndpoint, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    show('demo-userinfo', await res.json());
  }

  async function callback(cfg) {
    const params = new URLSearchParams(location.search);
    const tx = JSON.parse(sessionStorage.getItem(KEY) || 'null');
    if (params.get('error')) return fail(`${params.get('error')}: ${params.get('error_description') || ''}`);
    if (!tx) return fail('No sign-in in progress in this tab. Start again.');
    if (params.get('state') !== tx.state) return fail('The state parameter does not match: the response is not for this tab.');
    if (params.get('iss') !== location.origin && params.get('iss') !== new URL(cfg.tokenEndpoint).origin) return fail('Unexpected issuer (iss).');
    sessionStorage.removeItem(KEY);
    history.replaceState(null, '', location.pathname);
    let tokens = await tokenRequest(cfg.tokenEndpoint, {
      grant_type: 'authorization_code',
      code: params.get('code') || '',
      redirect_uri: tx.redirectUri,
      client_id: tx.clientId,
      code_verifier: tx.verifier,
    });
    $('demo-status').textContent = 'Signed in.';
    await showTokens(cfg, tx, tokens);
    const refresh = $('demo-refresh');
    refresh.disabled = false;
    refresh.addEventListener('click', async () => {
      try {
        tokens = await tokenRequest(cfg.tokenEndpoint, { grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: tx.clientId });
        $('demo-status').textContent = 'Refreshed: a new access token and a rotated refresh token.';
        await showTokens(cfg, {}, tokens);
      } catch (e) {
        fail(String(e.message || e));
      }
    });
  }

  const startEl = $('demo');
  if (startEl) $('demo-start').addEventListener('click', () => start(startEl.dataset).catch((e) => fail(String(e.message || e))));
  const cbEl = $('demo-callback');
  if (cbEl) callback(cbEl.dataset).catch((e) => fail(String(e.message || e)));
})();
