-- Gateway-local tables and the indexes its hot queries use. Times here are integers (seconds or
-- milliseconds since the epoch, as the column name says) because they are compared, not shown.

-- Revoking a session touches every token of it; operators look sessions up by installation.
CREATE INDEX IF NOT EXISTS weather_session_tokens_session ON weather_session_tokens(session_id);
CREATE INDEX IF NOT EXISTS weather_session_tokens_expires ON weather_session_tokens(expires_at);
CREATE INDEX IF NOT EXISTS anonymous_weather_sessions_installation ON anonymous_weather_sessions(installation_id_hash);
CREATE INDEX IF NOT EXISTS anonymous_weather_sessions_status ON anonymous_weather_sessions(status, revoked_at);

-- Ready-to-send weather bodies, one per snapped cell and request kind.
CREATE TABLE IF NOT EXISTS weather_cache (
  cache_key TEXT PRIMARY KEY,
  body BLOB NOT NULL,
  fetched_at INTEGER NOT NULL,
  fresh_until INTEGER NOT NULL,
  stale_until INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS weather_cache_stale ON weather_cache(stale_until);

-- Single flight: the worker holding a key's row is the one calling a provider for it.
CREATE TABLE IF NOT EXISTS weather_fetch_locks (
  cache_key TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  expires_at INTEGER NOT NULL
) WITHOUT ROWID;

-- Token buckets (GCRA): one theoretical arrival time, in milliseconds, per bucket key.
CREATE TABLE IF NOT EXISTS weather_rate_limits (
  bucket_key TEXT PRIMARY KEY,
  tat_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS weather_rate_limits_tat ON weather_rate_limits(tat_ms);

-- Distinct grid cells a session asked for, for the rolling per-day cell quota.
CREATE TABLE IF NOT EXISTS weather_session_cells (
  session_id TEXT NOT NULL,
  cell TEXT NOT NULL,
  first_seen_ms INTEGER NOT NULL,
  PRIMARY KEY (session_id, cell)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS weather_session_cells_seen ON weather_session_cells(first_seen_ms);

-- Hourly counters for `weatherctl stats`, flushed in batches by each worker.
CREATE TABLE IF NOT EXISTS weather_counters (
  hour TEXT NOT NULL,
  name TEXT NOT NULL,
  value INTEGER NOT NULL,
  PRIMARY KEY (hour, name)
) WITHOUT ROWID;
