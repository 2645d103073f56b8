import { type Kysely, sql } from 'kysely';

// Frozen in time: never import application code here.
//
// Developer user listing at scale (< 50 ms p95 with 1,000,000 users in one app), SQLite:
// - email, name and the platform status of the user are denormalised into app_users (triggers on
//   users keep them in sync); `list_status` = 'disabled' when the user is disabled platform-wide,
//   else the app's own status. Triggers fill them at insert, so inserting code needs no change.
// - `seq` is a stable integer key per app_users row (implicit rowids may change on VACUUM); it is the
//   rowid of the FTS5 trigram table that answers `q` (case-insensitive substring of email or name).
// - Exact totals come from app_user_counts, kept by triggers.
//
// data: the new app_users columns are backfilled from users, and triggers keep them, the counts and
// the search table in step with every later write; the version before this one never reads them, and
// its writes fire the same triggers.

const statements = [
  `ALTER TABLE app_users ADD COLUMN email TEXT NOT NULL DEFAULT ''`,
  `ALTER TABLE app_users ADD COLUMN name TEXT`,
  `ALTER TABLE app_users ADD COLUMN user_status TEXT NOT NULL DEFAULT 'active'`,
  `ALTER TABLE app_users ADD COLUMN list_status TEXT NOT NULL DEFAULT 'active'`,
  `ALTER TABLE app_users ADD COLUMN seq INTEGER`,
  `UPDATE app_users SET
     email = coalesce((SELECT u.email FROM users u WHERE u.id = app_users.user_id), ''),
     name = (SELECT u.name FROM users u WHERE u.id = app_users.user_id),
     user_status = coalesce((SELECT u.status FROM users u WHERE u.id = app_users.user_id), 'active'),
     seq = rowid`,
  `UPDATE app_users SET list_status = CASE WHEN user_status = 'disabled' THEN 'disabled' ELSE status END`,
  `CREATE UNIQUE INDEX app_users_seq_uq ON app_users (seq)`,
  `CREATE INDEX app_users_list_idx ON app_users (app_id, created_at DESC, user_id DESC)`,
  `CREATE INDEX app_users_list_status_idx ON app_users (app_id, list_status, created_at DESC, user_id DESC)`,

  `CREATE TABLE app_user_counts (
     app_id TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
     list_status TEXT NOT NULL,
     shard INTEGER NOT NULL,
     n INTEGER NOT NULL,
     PRIMARY KEY (app_id, list_status, shard)
   )`,
  `INSERT INTO app_user_counts (app_id, list_status, shard, n)
     SELECT app_id, list_status, 0, count(*) FROM app_users GROUP BY app_id, list_status`,

  `CREATE VIRTUAL TABLE app_users_fts USING fts5(search, tokenize = 'trigram')`,
  `INSERT INTO app_users_fts (rowid, search) SELECT seq, email || char(10) || coalesce(name, '') FROM app_users`,

  // New member: count it, then copy the user's fields and assign seq (which fires the triggers below).
  `CREATE TRIGGER app_users_ai AFTER INSERT ON app_users BEGIN
     INSERT INTO app_user_counts (app_id, list_status, shard, n) VALUES (NEW.app_id, NEW.list_status, 0, 1)
       ON CONFLICT (app_id, list_status, shard) DO UPDATE SET n = n + 1;
     UPDATE app_users SET
       email = coalesce((SELECT u.email FROM users u WHERE u.id = NEW.user_id), ''),
       name = (SELECT u.name FROM users u WHERE u.id = NEW.user_id),
       user_status = coalesce((SELECT u.status FROM users u WHERE u.id = NEW.user_id), 'active'),
       seq = coalesce((SELECT max(seq) FROM app_users), 0) + 1
     WHERE app_id = NEW.app_id AND user_id = NEW.user_id;
   END`,
  `CREATE TRIGGER app_users_au_status AFTER UPDATE OF status, user_status ON app_users BEGIN
     UPDATE app_users SET list_status = CASE WHEN NEW.user_status = 'disabled' THEN 'disabled' ELSE NEW.status END
     WHERE app_id = NEW.app_id AND user_id = NEW.user_id
       AND list_status IS NOT (CASE WHEN NEW.user_status = 'disabled' THEN 'disabled' ELSE NEW.status END);
   END`,
  `CREATE TRIGGER app_users_au_list AFTER UPDATE OF list_status ON app_users WHEN OLD.list_status IS NOT NEW.list_status BEGIN
     UPDATE app_user_counts SET n = n - 1 WHERE app_id = OLD.app_id AND list_status = OLD.list_status AND shard = 0;
     INSERT INTO app_user_counts (app_id, list_status, shard, n) VALUES (NEW.app_id, NEW.list_status, 0, 1)
       ON CONFLICT (app_id, list_status, shard) DO UPDATE SET n = n + 1;
   END`,
  `CREATE TRIGGER app_users_au_search AFTER UPDATE OF email, name, seq ON app_users BEGIN
     DELETE FROM app_users_fts WHERE rowid = OLD.seq;
     INSERT INTO app_users_fts (rowid, search) VALUES (NEW.seq, NEW.email || char(10) || coalesce(NEW.name, ''));
   END`,
  `CREATE TRIGGER app_users_ad AFTER DELETE ON app_users BEGIN
     UPDATE app_user_counts SET n = n - 1 WHERE app_id = OLD.app_id AND list_status = OLD.list_status AND shard = 0;
     DELETE FROM app_users_fts WHERE rowid = OLD.seq;
   END`,
  `CREATE TRIGGER users_au_sync_app_users AFTER UPDATE OF email, name, status ON users
   WHEN OLD.email IS NOT NEW.email OR OLD.name IS NOT NEW.name OR OLD.status IS NOT NEW.status BEGIN
     UPDATE app_users SET email = NEW.email, name = NEW.name, user_status = NEW.status WHERE user_id = NEW.id;
   END`,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of statements) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const name of ['users_au_sync_app_users', 'app_users_ad', 'app_users_au_search', 'app_users_au_list', 'app_users_au_status', 'app_users_ai']) {
    await sql.raw(`DROP TRIGGER IF EXISTS ${name}`).execute(db);
  }
  await sql.raw('DROP TABLE IF EXISTS app_users_fts').execute(db);
  await sql.raw('DROP TABLE IF EXISTS app_user_counts').execute(db);
  for (const name of ['app_users_seq_uq', 'app_users_list_idx', 'app_users_list_status_idx']) await sql.raw(`DROP INDEX IF EXISTS ${name}`).execute(db);
  for (const column of ['seq', 'list_status', 'user_status', 'name', 'email']) await sql.raw(`ALTER TABLE app_users DROP COLUMN ${column}`).execute(db);
}
