// Serves the single-page app of docs/quickstart/spa.md: its files, oidc-client-ts's browser build, and a
// config.js from the environment. Any static server does; this one needs nothing but Node 22+.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… PORT=5173 node examples/spa/serve.mjs

import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const here = dirname(new URL(import.meta.url).pathname);
const bundle = join(dirname(createRequire(import.meta.url).resolve('oidc-client-ts/package.json')), 'dist/browser/oidc-client-ts.min.js');
const config = `window.GATEHOUSE = ${JSON.stringify({ authority: process.env.GATEHOUSE_URL ?? 'http://localhost:3000', client_id: process.env.CLIENT_ID })};`;
const files = {
  '/oidc-client-ts.min.js': () => readFileSync(bundle),
  '/app.js': () => readFileSync(join(here, 'app.js')),
  '/config.js': () => config,
};

const server = createServer((request, response) => {
  const path = new URL(request.url, 'http://x').pathname;
  const file = files[path];
  if (file) return response.writeHead(200, { 'content-type': 'text/javascript' }).end(file());
  // Every other path is the app (its /callback included).
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(readFileSync(join(here, 'index.html')));
});

// Open it as http://localhost:…, not 127.0.0.1: localhost is a secure context (WebCrypto for PKCE) without https.
server.listen(Number(process.env.PORT ?? 5173), '127.0.0.1', () => console.log(`listening on http://localhost:${server.address().port}`));
