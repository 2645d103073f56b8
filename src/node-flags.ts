/**
 * The V8 flags every server process runs with: `npm start`, the Docker image's command, the workers of
 * `WORKERS>1` and the benchmark all start node with them.
 *
 * `--max-semi-space-size=4` caps V8's young generation at two 4 MiB semi-spaces. By default it grows to
 * two 16 MiB ones (loading the modules alone fills them) and keeps them: ~23 MB of every process's
 * memory, at rest and under every load of `npm run bench -- http`, for no throughput measured
 * (docs/adr/0010-process-memory.md).
 *
 * `--heap-growing-percent=20` lets the old generation grow to 1.2× what was alive after a major
 * collection before the next one, where V8 by default allows up to 4× while its collections are fast.
 * At a few thousand grants a second the garbage promoted between collections took a grant's process to
 * 200–220 MB; with the flag 139–145 MB on SQLite and 117–122 MB on PostgreSQL, for no throughput
 * measured and a few ms more p99 (docs/adr/0010-process-memory.md).
 *
 * Both are settings of V8's heap made when the process starts: a running process cannot change them,
 * so they must be on the command line.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4', '--heap-growing-percent=20'];

/**
 * The preload that sizes libuv's thread pool for the password line (bin/thread-pool-size.cjs), as npm
 * start, the Docker image and the benchmark give it: a path from the package root, where they start.
 * The CLI (bin/gatehouse.cjs) requires it itself. A cluster worker inherits the size through its
 * primary's environment.
 */
export const THREAD_POOL_PRELOAD: readonly string[] = ['--require', './bin/thread-pool-size.cjs'];

/** What node is given before the entry where a server is started from the package root: npm start, Docker, the benchmark. */
export const SERVER_START_ARGS: readonly string[] = [...SERVER_NODE_FLAGS, ...THREAD_POOL_PRELOAD];

/** `execArgv` with the server's flags, each once; a flag given explicitly (`--max-semi-space-size=8`) wins. */
export function withServerFlags(execArgv: readonly string[]): string[] {
  const nameOf = (flag: string) => flag.split('=')[0];
  const given = new Set(execArgv.map(nameOf));
  return [...SERVER_NODE_FLAGS.filter((flag) => !given.has(nameOf(flag))), ...execArgv];
}
