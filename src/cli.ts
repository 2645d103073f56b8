import { run } from './cli/run.js';

// `gatehouse <command>` (docs/reference/cli.md): the operator's CLI (src/cli/run.ts), run as this process.
run(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code; // `serve` keeps running on its open server; every other command ends here.
  },
  (error) => {
    process.stderr.write(`fatal: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
