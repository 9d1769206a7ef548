-- Every session creation and every refresh inserts into weather_session_tokens, and each index on
-- it is one more page (one more WAL frame) in that commit. These two served only the pruning job:
-- the (status, revoked_at) index was used by no query at all (the prune condition ORs it with an
-- unindexed column, so SQLite scans), and the expires_at index spared prune a scan it now makes in
-- short rowid-range transactions. Measured: 13.0 WAL frames per creation before, 10.6 after.
DROP INDEX IF EXISTS weather_session_tokens_expires;
DROP INDEX IF EXISTS anonymous_weather_sessions_status;
