'use strict';
// Loaded by every server process before any ES module: given with `--require` by npm start, the Docker
// image and the benchmark (src/node-flags.ts), required first by the CLI (bin/gatehouse.cjs). libuv
// reads UV_THREADPOOL_SIZE once, when its pool starts, and Node's ES module loader starts it while
// loading the entry: set from the server's own code, the size would come too late
// (docs/adr/0009-password-line.md).
//
// Password checks run up to one per core plus one at once (src/auth/passwords.ts), each holding a pool
// thread for ~13 ms. The pool gets one thread more than that, and never fewer than libuv's 4, so that
// ES256 verifications, RS256 signatures and file reads still find a thread during a login burst. An
// operator's own UV_THREADPOOL_SIZE is kept: the password line then fits itself under it.
const { availableParallelism } = require('node:os');

process.env.UV_THREADPOOL_SIZE ??= String(Math.max(4, availableParallelism() + 2));
