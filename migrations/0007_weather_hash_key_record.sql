-- Which hash key this database's installation-id hashes (and refresh successors) were made
-- with: a fingerprint, never the key (lowercase hex HMAC-SHA256 of a fixed label under the key,
-- which tells nothing of it). One row, written by the first worker that starts on the database
-- with this release. A worker whose key gives another fingerprint, where the database holds
-- sessions, refuses to start: a restore beside another `hash.key`, or a `WEATHER_HASH_KEY` that
-- differs between hosts, disagreed with the stored hashes without a word. `weatherctl
-- adopt-hash-key` records a new key on purpose.
CREATE TABLE IF NOT EXISTS weather_hash_key (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  fingerprint TEXT NOT NULL,
  recorded_at INTEGER NOT NULL
);
