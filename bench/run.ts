/**
 * Benchmarks (not part of `npm test`): `npm run bench -- <name> [options]`.
 *   users-listing   developer user listing with 1,000,000 users in one app (SQLite and PostgreSQL)
 *   login-timing    login answer times for unknown vs known emails
 *   http            the hot paths of the production build over HTTP (autocannon), against references
 *   key-order       pages a SQLite commit writes per refresh, with random or time-ordered token keys
 *   login-flood     password logins from more clients than answered in time, each giving up after a timeout
 *   jwt-sign        our JWT signatures through node:crypto against jose's SignJWT
 *   statements      the storage layer's hot operations in process: SQLite rotations, the PostgreSQL bearer read
 *   cpu             the server's CPU µs per grant (refresh, refresh-id, code) on SQLite, against --baseline DIR
 */
const benches: Record<string, () => Promise<{ main(args: string[]): Promise<void> }>> = {
  'users-listing': () => import('./users-listing.js'),
  'login-timing': () => import('./login-timing.js'),
  http: () => import('./http/harness.js'),
  'key-order': () => import('./key-order.js'),
  'login-flood': () => import('./login-flood.js'),
  'jwt-sign': () => import('./jwt-sign.js'),
  statements: () => import('./statements.js'),
  cpu: () => import('./cpu.js'),
};

const [name, ...args] = process.argv.slice(2);
const load = name ? benches[name] : undefined;
if (!load) {
  console.error(`usage: npm run bench -- <${Object.keys(benches).join('|')}> [options]`);
  process.exit(2);
}
await (await load()).main(args);
