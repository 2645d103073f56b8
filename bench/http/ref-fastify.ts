import { hash as argon2Hash, verify as argon2Verify, type Options as Argon2Options } from '@node-rs/argon2';
import Database from 'better-sqlite3';
import Fastify from 'fastify';
import { generateKeyPair, jwtVerify, SignJWT } from 'jose';
import { join } from 'node:path';

/**
 * Bare Fastify ceilings for `npm run bench -- http` (NODE_ENV=production, Fastify's defaults: no logger).
 * One mode per process, or several joined by `+` (`jose+argon2`, for bearer reads during a login burst):
 *   hello   GET /hello → {"hello":"world"}
 *   jose    GET /profile/:userId: jose ES256 jwtVerify with a pre-imported key, then one better-sqlite3
 *           prepared SELECT by primary key on a small table (file database, WAL), JSON answer
 *   argon2  POST /login {email, password}: argon2 `verify` against a hash made with Gatehouse's own
 *           parameters (ARGON2_OPTIONS of src/auth/passwords.ts, from the production build) and its own
 *           implementation (`@node-rs/argon2`), so the ceiling is the password check Gatehouse makes
 * `GET /__bench/setup` hands the harness what it needs to drive the modes: `tokens` (jose: a user id and
 * its access token each), `logins` (argon2: email and password each).
 * Usage: node --import tsx bench/http/ref-fastify.ts <mode>[+<mode>…] <port> <dataDir>
 */

const [modeArg, portArg, dataDir] = process.argv.slice(2);
const port = Number(portArg);
const app = Fastify();
const setup: { tokens?: Array<{ userId: string; token: string }>; logins?: Array<{ email: string; password: string }>; options?: unknown } = {};

for (const mode of modeArg!.split('+')) await addMode(mode);

async function addMode(mode: string): Promise<void> {
  if (mode === 'hello') {
    app.get('/hello', async () => ({ hello: 'world' }));
  } else if (mode === 'jose') {
    const { publicKey, privateKey } = await generateKeyPair('ES256', { extractable: true });
    const db = new Database(join(dataDir!, 'ref-jose.db'));
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    db.exec('CREATE TABLE IF NOT EXISTS profiles (user_id TEXT PRIMARY KEY, data TEXT NOT NULL, version INTEGER NOT NULL, updated_at INTEGER NOT NULL)');
    const insert = db.prepare('INSERT OR REPLACE INTO profiles (user_id, data, version, updated_at) VALUES (?, ?, ?, ?)');
    const users: Array<{ userId: string; token: string }> = [];
    const now = Math.floor(Date.now() / 1000);
    for (let i = 0; i < 64; i++) {
      const userId = `usr_ref${String(i).padStart(4, '0')}`;
      insert.run(userId, JSON.stringify({ theme: 'dark', favourites: [3, 14], n: i }), 1, now);
      const token = await new SignJWT({ client_id: 'app_ref', scope: 'openid profile email', sid: `grt_${i}`, jti: `at_${i}` })
        .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'k1' })
        .setIssuer('https://ref.bench.test')
        .setSubject(userId)
        .setAudience('app_ref')
        .setIssuedAt()
        .setExpirationTime('2h')
        .sign(privateKey);
      users.push({ userId, token });
    }
    const select = db.prepare('SELECT user_id, data, version, updated_at FROM profiles WHERE user_id = ?');
    app.get('/profile/:userId', async (request, reply) => {
      const header = request.headers.authorization ?? '';
      if (!header.startsWith('Bearer ')) return reply.code(401).send({ code: 'unauthorized' });
      let sub: string | undefined;
      try {
        const { payload } = await jwtVerify(header.slice(7), publicKey, { algorithms: ['ES256'], typ: 'at+jwt', issuer: 'https://ref.bench.test', audience: 'app_ref' });
        sub = payload.sub;
      } catch {
        return reply.code(401).send({ code: 'unauthorized' });
      }
      const { userId } = request.params as { userId: string };
      if (sub !== userId) return reply.code(403).send({ code: 'forbidden' });
      const row = select.get(userId) as { user_id: string; data: string; version: number; updated_at: number } | undefined;
      if (!row) return reply.code(404).send({ code: 'profile_not_found' });
      return { userId: row.user_id, data: JSON.parse(row.data), updated_at: new Date(row.updated_at * 1000).toISOString(), version: row.version };
    });
    setup.tokens = users;
  } else if (mode === 'argon2') {
    // The production build's parameters, so the ceiling moves with Gatehouse's configuration.
    const { ARGON2_OPTIONS } = (await import(new URL('../../dist/src/auth/passwords.js', import.meta.url).href)) as { ARGON2_OPTIONS: Argon2Options };
    const hashes = new Map<string, string>();
    const users: Array<{ email: string; password: string }> = [];
    for (let i = 0; i < 16; i++) {
      const email = `ref${i}@bench.test`;
      const password = `ref-bench-password-${i}-x7q`;
      hashes.set(email, await argon2Hash(password.normalize('NFC'), ARGON2_OPTIONS));
      users.push({ email, password });
    }
    app.post('/login', async (request, reply) => {
      const { email, password } = (request.body ?? {}) as { email?: string; password?: string };
      const hash = typeof email === 'string' ? hashes.get(email.trim().toLowerCase()) : undefined;
      if (!hash || typeof password !== 'string' || !(await argon2Verify(hash, password.normalize('NFC')))) {
        return reply.code(401).send({ code: 'invalid_credentials' });
      }
      return { status: 'ok' };
    });
    setup.logins = users;
    setup.options = ARGON2_OPTIONS;
  } else {
    console.error(`unknown mode ${mode}`);
    process.exit(2);
}
}

app.get('/__bench/setup', async () => setup);
app.get('/__bench/ready', async () => ({ ok: true }));
await app.listen({ port, host: '127.0.0.1' });
const shutdown = () => app.close().then(() => process.exit(0));
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
