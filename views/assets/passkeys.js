// Gatehouse hosted pages: passkeys (WebAuthn) with @simplewebauthn/browser (loaded before this script).
// A passkey form carries `data-webauthn="create"` (add a passkey) or `"get"` (use one) and
// `data-webauthn-options` (where to ask for options). It stays hidden until this script finds WebAuthn.
// On submit the script asks for options (bound to this browser session, with its CSRF token), runs the
// ceremony, puts the answer in the form's `response` field and submits the form. A form with
// `data-webauthn-autofill` also offers passkeys in the autofill of an `autocomplete="… webauthn"` field.
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
  function wire(form, ceremony) {
    const button = form.querySelector('button[name=action]');
    form.hidden = false;
    form.addEventListener('submit', async (event) => {
      if (form.elements.response.value) return;
      event.preventDefault();
      button.disabled = true;
      try {
        const answer = await ceremony(await options(form.dataset.webauthnOptions, form));
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

  const ceremonies = {
    create: (optionsJSON) => lib.startRegistration({ optionsJSON }),
    get: (optionsJSON) => lib.startAuthentication({ optionsJSON }),
  };
  for (const form of document.querySelectorAll('form[data-webauthn]')) {
    const ceremony = ceremonies[form.dataset.webauthn];
    if (ceremony) wire(form, ceremony);
  }

  // Conditional UI: the passkeys of this site appear among the field's suggestions. A click on the form's
  // button aborts this pending request (the library allows one ceremony at a time).
  const autofill = document.querySelector('form[data-webauthn=get][data-webauthn-autofill]');
  if (autofill) {
    lib.browserSupportsWebAuthnAutofill().then(async (supported) => {
      if (!supported || !document.querySelector('input[autocomplete~=webauthn]')) return;
      try {
        const optionsJSON = await options(autofill.dataset.webauthnOptions, autofill);
        finish(autofill, await lib.startAuthentication({ optionsJSON, useBrowserAutofill: true }));
      } catch {
        // aborted by the button, or no passkey chosen: the form stays as it is
      }
    });
  }
})();
