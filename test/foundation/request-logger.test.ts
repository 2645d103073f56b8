import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { LazyRequestLogger, loggerOptions } from '../../src/plugins/logger.js';

/** The per-request logger: pino's child built on first use, writing the very lines pino's child writes. */
describe('LazyRequestLogger', () => {
  function parentLogger(level = 'info') {
    const lines: Array<Record<string, unknown>> = [];
    let children = 0;
    const logger = pino(
      { ...loggerOptions(level), timestamp: false, onChild: () => void children++ },
      { write: (line: string) => void lines.push(JSON.parse(line)) },
    );
    return { logger, lines, children: () => children };
  }

  it('builds no child for a request that never logs', () => {
    const { logger, children } = parentLogger();
    const log = new LazyRequestLogger(logger, { reqId: 'r-1' }, {});
    expect(log.level).toBe('info');
    expect(children()).toBe(0);
  });

  it('writes what pino\'s own child writes: bindings and redaction included', () => {
    const lazy = parentLogger();
    const eager = parentLogger();
    const entries: Array<[string, unknown, string]> = [
      ['info', { body: { password: 'hunter2-secret', email: 'a@example.com' } }, 'signed in'],
      ['warn', { grant: { refresh_token: 'rt-secret' } }, 'refused'],
      ['error', { err: new Error('boom') }, 'failed'],
    ];
    const log = new LazyRequestLogger(lazy.logger, { reqId: 'r-2' }, {});
    const own = eager.logger.child({ reqId: 'r-2' });
    for (const [level, object, msg] of entries) {
      log[level as 'info'](object, msg);
      own[level as 'info'](object, msg);
    }
    expect(lazy.lines).toEqual(eager.lines);
    expect(lazy.lines.map((l) => l.reqId)).toEqual(['r-2', 'r-2', 'r-2']);
    expect(JSON.stringify(lazy.lines)).not.toMatch(/hunter2-secret|rt-secret/);
    expect(lazy.children()).toBe(1);
  });

  it('keeps a route\'s own level (Fastify passes it in the options)', () => {
    const { logger, lines } = parentLogger('info');
    const log = new LazyRequestLogger(logger, { reqId: 'r-3' }, { level: 'warn' });
    expect(log.level).toBe('warn');
    log.info('dropped at warn');
    log.warn('kept at warn');
    expect(lines.map((l) => l.msg)).toEqual(['kept at warn']);
  });

  it('follows a level set on it, and its children carry both bindings', () => {
    const { logger, lines } = parentLogger('info');
    const log = new LazyRequestLogger(logger, { reqId: 'r-4' }, {});
    log.debug('dropped at info');
    log.level = 'debug';
    log.debug('kept at debug');
    log.child({ step: 'callback' }).info('from a child');
    expect(lines.map((l) => [l.msg, l.reqId, l.step])).toEqual([
      ['kept at debug', 'r-4', undefined],
      ['from a child', 'r-4', 'callback'],
    ]);
    expect(logger.level).toBe('info');
  });
});
