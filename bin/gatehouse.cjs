#!/usr/bin/env node
'use strict';
// `npx gatehouse …`: runs the TypeScript CLI through tsx from a checkout, or the compiled CLI in a
// build that ships only dist/ (e.g. the Docker image).
//
// A CommonJS file so that it can size libuv's thread pool before any ES module loads (loading one
// starts the pool; bin/thread-pool-size.cjs): `gatehouse serve` then runs the password line as
// `npm start` does.
require('./thread-pool-size.cjs');
const { existsSync } = require('node:fs');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');

async function run() {
  const source = join(__dirname, '../src/cli.ts');
  if (existsSync(source)) {
    const { register } = await import('tsx/esm/api');
    register();
    await import(pathToFileURL(source).href);
  } else {
    await import(pathToFileURL(join(__dirname, '../dist/src/cli.js')).href);
  }
}

run().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
