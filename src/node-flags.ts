/**
 * The V8 flags every server process runs with: `npm start`, the Docker image's command, the workers of
 * `WORKERS>1` and the benchmark all start node with them.
 *
 * `--max-semi-space-size=4` caps V8's young generation at two 4 MiB semi-spaces. By default it grows to
 * two 16 MiB ones (loading the modules alone fills them) and keeps them: ~23 MB of every process's
 * memory, at rest and under every load of `npm run bench -- http`, for no throughput measured
 * (bench/RESULTS.md, finding 44). It is a setting of V8's heap made when the process starts: a running
 * process cannot change it, so it must be on the command line.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];

/** `execArgv` with the server's flags, each once; a flag given explicitly (`--max-semi-space-size=8`) wins. */
export function withServerFlags(execArgv: readonly string[]): string[] {
  const nameOf = (flag: string) => flag.split('=')[0];
  const given = new Set(execArgv.map(nameOf));
  return [...SERVER_NODE_FLAGS.filter((flag) => !given.has(nameOf(flag))), ...execArgv];
}
