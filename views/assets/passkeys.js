// Gatehouse hosted pages: passkeys (WebAuthn) with @simplewebauthn/browser (loaded before this script).
// A passkey form (`#passkey-add` on /account, `#passkey-signin` on /login) is hidden until this script
// finds WebAuthn. On submit it asks the server for options (bound to this browser session, with its
// CSRF token), runs the ceremony, puts the answer in the form's `response` field and submits the form.
// On /login, where the browser supports it, passkeys are also offered in the email field's autofill.
(() => {
  'use strict';
  const lib = window.SimpleWebAuthnBrowser;
  if (!lib || !lib.browserSupportsWebAuthn()) return;

  async function options(url, form) {
    const res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      credentials: 'same-origin',
      body: JSON.stringify({ csrf: form.elements.csrf.value }),
    });
    const body = await res.json();
    if (!res.ok) throw new Error(body.message || 'The passkey options could not be loaded.');
    return body;
  }

  function showError(form, error) {
    const p = form.querySelector('p.error');
    // A cancelled or timed-out ceremony says nothing useful: the page's own message does.
    p.textContent = error && error.name === 'Error' && error.message ? error.message : form.dataset.passkeyError;
    p.hidden = false;
  }

  /** Runs `ceremony` on submit, then submits the form again with the answer (the second submit goes through). */
  function wire(form, optionsUrl, ceremony) {
    const button = form.querySelector('button[name=action]');
    form.hidden = false;
    form.addEventListener('submit', async (event) => {
      if (form.elements.response.value) return;
      event.preventDefault();
      button.disabled = true;
      try {
        const answer = await ceremony(await options(optionsUrl, form));
        finish(form, answer);
      } catch (error) {
        button.disabled = false;
        if (error && error.name === 'AbortError') return; // replaced by another ceremony
        showError(form, error);
      }
    });
  }

  function finish(form, answer) {
    const button = form.querySelector('button[name=action]');
    form.elements.response.value = JSON.stringify(answer);
    button.disabled = false;
    form.requestSubmit(button);
  }

  const add = document.getElementById('passkey-add');
  if (add) wire(add, '/account/passkeys/options', (optionsJSON) => lib.startRegistration({ optionsJSON }));

  const signIn = document.getElementById('passkey-signin');
  if (signIn) {
    wire(signIn, '/login/passkey/options', (optionsJSON) => lib.startAuthentication({ optionsJSON }));
    // Conditional UI: the passkeys of this site appear among the email field's suggestions. A click on
    // the button above aborts this pending request (the library allows one ceremony at a time).
    lib.browserSupportsWebAuthnAutofill().then(async (supported) => {
      if (!supported || !document.querySelector('input[autocomplete~=webauthn]')) return;
      try {
        const answer = await lib.startAuthentication({ optionsJSON: await options('/login/passkey/options', signIn), useBrowserAutofill: true });
        finish(signIn, answer);
      } catch {
        // aborted by the button, or no passkey chosen: the form stays as it is
      }
    });
  }
})();
