import { parentPort } from 'node:worker_threads';
import { renderMarkdownBounded } from './markdown.js';

/**
 * The legal Markdown render worker (started by `renderer.ts`): answers `{id, markdown}` with
 * `{id, ok, html | problem}`. The parent terminates it when a render exceeds the time limit.
 */
const port = parentPort;
if (!port) throw new Error('render-worker.ts must run in a worker thread');

port.on('message', (job: { id: number; markdown: string }) => {
  port.postMessage({ id: job.id, ...renderMarkdownBounded(job.markdown) });
});
port.postMessage({ ready: true });
