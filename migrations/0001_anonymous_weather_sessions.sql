-- The two tables shared with the Cloudflare D1 deployment. Keep them column-for-column identical.
CREATE TABLE IF NOT EXISTS anonymous_weather_sessions (
  id TEXT PRIMARY KEY,
  installation_id_hash TEXT NOT NULL,
  platform TEXT NOT NULL,
  app_version TEXT,
  status TEXT NOT NULL,
  created_at TEXT NOT NULL,
  last_seen_at TEXT NOT NULL,
  revoked_at TEXT
);
CREATE TABLE IF NOT EXISTS weather_session_tokens (
  id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES anonymous_weather_sessions(id),
  token_hash TEXT NOT NULL UNIQUE,
  token_type TEXT NOT NULL,
  expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL,
  revoked_at TEXT
);
