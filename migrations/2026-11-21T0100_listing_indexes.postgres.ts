import { type Kysely, sql } from 'kysely';

// Frozen in time: never import application code here.
//
// Developer user listing at scale (< 50 ms p95 with 1,000,000 users in one app).
// - The user's email, name and platform status are denormalised into app_users (kept in sync by
//   triggers on users), so one table answers filter + order + page without joining 1M users.
// - `list_status` is what the listing shows and filters on: 'disabled' when the user is disabled
//   platform-wide, otherwise the app's own status ('active' | 'blocked'). Set by a BEFORE trigger.
// - Exact totals come from app_user_counts, kept by triggers (sharded 16 ways so concurrent first
//   sign-ins to one app do not queue on a single counter row).
// - `q` (case-insensitive substring) uses one pg_trgm GIN index on lower(email || ' ' || name).
//
// data: the new app_users columns are backfilled from users, and triggers keep them and the counts in
// step with every later write; the version before this one never reads them, and its writes to users
// and app_users fire the same triggers, so it keeps working while this one starts.

export async function up(db: Kysely<any>): Promise<void> {
  await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);

  await sql`ALTER TABLE app_users
    ADD COLUMN email text NOT NULL DEFAULT '',
    ADD COLUMN name text,
    ADD COLUMN user_status text NOT NULL DEFAULT 'active',
    ADD COLUMN list_status text NOT NULL DEFAULT 'active'`.execute(db);
  await sql`UPDATE app_users au SET email = u.email, name = u.name, user_status = u.status FROM users u WHERE u.id = au.user_id`.execute(db);
  await sql`UPDATE app_users SET list_status = CASE WHEN user_status = 'disabled' THEN 'disabled' ELSE status END`.execute(db);

  await sql`CREATE TABLE app_user_counts (
    app_id text NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
    list_status text NOT NULL,
    shard integer NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (app_id, list_status, shard)
  )`.execute(db);
  await sql`INSERT INTO app_user_counts (app_id, list_status, shard, n)
    SELECT app_id, list_status, 0, count(*) FROM app_users GROUP BY app_id, list_status`.execute(db);

  await sql`CREATE FUNCTION gh_app_users_fill() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        SELECT u.email, u.name, u.status INTO NEW.email, NEW.name, NEW.user_status FROM users u WHERE u.id = NEW.user_id;
        NEW.email := coalesce(NEW.email, '');
        NEW.user_status := coalesce(NEW.user_status, 'active');
      END IF;
      NEW.list_status := CASE WHEN NEW.user_status = 'disabled' THEN 'disabled' ELSE NEW.status END;
      RETURN NEW;
    END $$`.execute(db);
  await sql`CREATE TRIGGER app_users_fill BEFORE INSERT OR UPDATE ON app_users
    FOR EACH ROW EXECUTE FUNCTION gh_app_users_fill()`.execute(db);

  await sql`CREATE FUNCTION gh_app_users_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'DELETE' OR TG_OP = 'UPDATE' THEN
        UPDATE app_user_counts SET n = n - 1
          WHERE app_id = OLD.app_id AND list_status = OLD.list_status AND shard = (hashtext(OLD.user_id) & 15);
      END IF;
      IF TG_OP = 'INSERT' OR TG_OP = 'UPDATE' THEN
        INSERT INTO app_user_counts (app_id, list_status, shard, n) VALUES (NEW.app_id, NEW.list_status, hashtext(NEW.user_id) & 15, 1)
          ON CONFLICT (app_id, list_status, shard) DO UPDATE SET n = app_user_counts.n + 1;
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  await sql`CREATE TRIGGER app_users_count AFTER INSERT OR DELETE ON app_users
    FOR EACH ROW EXECUTE FUNCTION gh_app_users_count()`.execute(db);
  await sql`CREATE TRIGGER app_users_count_status AFTER UPDATE ON app_users
    FOR EACH ROW WHEN (OLD.list_status IS DISTINCT FROM NEW.list_status) EXECUTE FUNCTION gh_app_users_count()`.execute(db);

  await sql`CREATE FUNCTION gh_users_sync_app_users() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      UPDATE app_users SET email = NEW.email, name = NEW.name, user_status = NEW.status WHERE user_id = NEW.id;
      RETURN NULL;
    END $$`.execute(db);
  await sql`CREATE TRIGGER users_sync_app_users AFTER UPDATE ON users FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email OR OLD.name IS DISTINCT FROM NEW.name OR OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION gh_users_sync_app_users()`.execute(db);

  await sql`CREATE INDEX app_users_list_idx ON app_users (app_id, created_at DESC, user_id DESC)`.execute(db);
  await sql`CREATE INDEX app_users_list_status_idx ON app_users (app_id, list_status, created_at DESC, user_id DESC)`.execute(db);
  // One trigram index over both searchable fields: a `q` lookup is one GIN scan, not a BitmapOr of two.
  // The listing re-checks "email or name" on the candidates, so a match across the separator never counts.
  await sql`CREATE INDEX app_users_search_trgm_idx ON app_users USING gin ((lower(email || ' ' || coalesce(name, ''))) gin_trgm_ops)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS users_sync_app_users ON users`.execute(db);
  await sql`DROP TRIGGER IF EXISTS app_users_count_status ON app_users`.execute(db);
  await sql`DROP TRIGGER IF EXISTS app_users_count ON app_users`.execute(db);
  await sql`DROP TRIGGER IF EXISTS app_users_fill ON app_users`.execute(db);
  await sql`DROP FUNCTION IF EXISTS gh_users_sync_app_users()`.execute(db);
  await sql`DROP FUNCTION IF EXISTS gh_app_users_count()`.execute(db);
  await sql`DROP FUNCTION IF EXISTS gh_app_users_fill()`.execute(db);
  await sql`DROP TABLE IF EXISTS app_user_counts`.execute(db);
  await sql`DROP INDEX IF EXISTS app_users_list_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS app_users_list_status_idx`.execute(db);
  await sql`DROP INDEX IF EXISTS app_users_search_trgm_idx`.execute(db);
  await sql`ALTER TABLE app_users DROP COLUMN email, DROP COLUMN name, DROP COLUMN user_status, DROP COLUMN list_status`.execute(db);
}
