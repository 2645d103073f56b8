import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/** A quickstart page shows its example exactly as CI runs it (docs/quickstart/). */
describe('quickstart pages', () => {
  it.each([
    ['docs/quickstart/rest-backend.md', 'examples/rest-backend/index.mjs', 'js'],
    ['docs/quickstart/verify-tokens.md', 'examples/verify-tokens/server.mjs', 'js'],
    ['docs/quickstart/list-users.md', 'examples/list-users/index.mjs', 'js'],
    ['docs/quickstart/web-app.md', 'examples/web-app/server.mjs', 'js'],
    ['docs/quickstart/spa.md', 'examples/spa/index.html', 'html'],
    ['docs/quickstart/spa.md', 'examples/spa/app.js', 'js'],
    ['docs/quickstart/cli-app.md', 'examples/cli-app/index.mjs', 'js'],
    ['docs/quickstart/native-app.md', 'examples/native-app/system-browser.mjs', 'js'],
    ['docs/quickstart/native-app.md', 'examples/native-app/provider-token.mjs', 'js'],
  ])('%s shows %s as it is', (page, example, language) => {
    const text = readFileSync(new URL(`../../${page}`, import.meta.url), 'utf8');
    const code = readFileSync(new URL(`../../${example}`, import.meta.url), 'utf8');
    expect(text).toContain('```' + language + '\n' + code + '```');
  });
});
