#!/usr/bin/env node
// `npx gatehouse …`: runs the TypeScript CLI through tsx from a checkout, or the compiled CLI in a
// build that ships only dist/ (e.g. the Docker image).
import { existsSync } from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  await import(source.href);
} else {
  await import(new URL('../dist/src/cli.js', import.meta.url).href);
}
