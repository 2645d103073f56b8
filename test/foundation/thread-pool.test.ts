import { describe, expect, it } from 'vitest';
import { threadPoolSize } from '../../src/shared/thread-pool.js';

describe('threadPoolSize reads UV_THREADPOOL_SIZE as libuv does', () => {
  it.each([
    { value: undefined, size: 4 },
    { value: '6', size: 6 },
    { value: '1', size: 1 },
    { value: '0', size: 1 },
    { value: '', size: 1 },
    { value: 'many', size: 1 },
    { value: '12abc', size: 12 },
    { value: ' 8', size: 8 },
    { value: '1024', size: 1024 },
    { value: '5000', size: 1024 },
    { value: '-3', size: 1024 },
  ])('$value → $size', ({ value, size }) => {
    expect(threadPoolSize(value)).toBe(size);
  });
});
