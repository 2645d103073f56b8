import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { logRefusal, toAppError } from '../../src/plugins/error-handler.js';
import { TurnAbandoned, TurnOverdue } from '../../src/shared/turns.js';

// The one mapper from anything thrown to an AppError: database outages fail closed with 503.
describe('toAppError', () => {
  it.each([
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' })],
    ['PostgreSQL shutting down (57P01)', Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' })],
    ['too many connections (53300)', Object.assign(new Error('sorry, too many clients already'), { code: '53300' })],
    ['the pool acquire timeout', new Error('timeout exceeded when trying to connect')],
    ['a dropped connection', new Error('Connection terminated unexpectedly')],
    ['the rollback on a dropped connection', new Error('Client has encountered a connection error and is not queryable')],
    ['SQLite busy', Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })],
  ])('%s → 503 service_unavailable with Retry-After', (_name, error) => {
    const mapped = toAppError(error);
    expect(mapped.code).toBe('service_unavailable');
    expect(mapped.status).toBe(503);
    expect(mapped.headers).toEqual({ 'retry-after': '5' });
    expect(mapped.publicMessage).not.toMatch(/ECONN|5432|locked|clients/);
  });

  it('anything else unexpected → 500 internal_error with a generic message', () => {
    const mapped = toAppError(new TypeError("Cannot read properties of undefined (reading 'x')"));
    expect(mapped.code).toBe('internal_error');
    expect(mapped.status).toBe(500);
    expect(mapped.publicMessage).toBe('Internal server error.');
  });

  it('a value PostgreSQL refuses (SQLSTATE class 22, e.g. a NUL byte) → 400 invalid_request', () => {
    const nul = Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021', severity: 'ERROR' });
    const mapped = toAppError(nul);
    expect(mapped.code).toBe('invalid_request');
    expect(mapped.status).toBe(400);
    expect(mapped.publicMessage).not.toMatch(/UTF8|0x00/);
  });

  it('work skipped because its client had gone → 499 (nginx\'s "client closed request"), not a server fault', () => {
    const mapped = toAppError(new TurnAbandoned());
    expect(mapped.status).toBe(499);
    expect(mapped.status).toBeLessThan(500); // logged at info, not as an error
  });

  it.each([
    [5000, '5'],
    [2500, '3'],
    [100, '1'],
  ])('work that waited over a %i ms bound → 503 service_unavailable, Retry-After %s s', (maxWaitMs, retryAfter) => {
    const mapped = toAppError(new TurnOverdue(maxWaitMs + 40, maxWaitMs));
    expect([mapped.code, mapped.status]).toEqual(['service_unavailable', 503]);
    expect(mapped.headers).toEqual({ 'retry-after': retryAfter });
  });

  it('a unique-constraint violation is not an outage', () => {
    expect(toAppError(Object.assign(new Error('duplicate key'), { code: '23505' })).code).toBe('internal_error');
  });
});

describe('logRefusal', () => {
  const outage = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
  it.each([
    ['a failure with its cause (an outage)', toAppError(outage), 'error', 'request failed'],
    ['a bug', toAppError(new Error('boom')), 'error', 'request failed'],
    ['overloaded password checks: a 503 the server chose', toAppError(new TurnOverdue(5100, 5000)), 'warn', 'request refused'],
    ['a provider that is not configured', new AppError('idp_oauth_not_configured'), 'warn', 'request refused'],
    ["the client's own mistake", new AppError('invalid_credentials', { detail: 'wrong password' }), 'info', 'request rejected'],
    ['a client gone before its turn (499)', toAppError(new TurnAbandoned()), 'info', 'request rejected'],
  ])('%s → one line at %s', (_name, err, level, message) => {
    const lines: Array<[string, Record<string, unknown>, string]> = [];
    const at = (name: string) => (fields: Record<string, unknown>, msg: string) => void lines.push([name, fields, msg]);
    logRefusal({ log: { error: at('error'), warn: at('warn'), info: at('info') } } as never, err);
    expect(lines.map(([name, , msg]) => [name, msg])).toEqual([[level, message]]);
    // Only a failure carries an error object (its stack); a refusal logs its code and detail.
    expect('err' in lines[0]![1]).toBe(level === 'error');
  });
});
