-- Every session creation inserts into anonymous_weather_sessions, and this index put each new row
-- on a random page: installation_id_hash is an HMAC, so consecutive creations land far apart, one
-- more page (one more WAL frame, and on a big database one more page to read and to copy back) in
-- every creation's commit. No request a worker serves reads it: only weatherctl's look-ups by
-- installation (sessions list --installation-id, session show's count of its installation's
-- sessions, revoke --installation-id), which now scan the table once, outside any write
-- transaction (0.1-0.2 s for 1.1 M sessions whose file is in memory). Measured on a database of
-- 1 M sessions: creation 1.11-1.25 times as fast without it, 53 instead of 65 KB written a
-- creation. Dropping it there takes about half a second, once, at the first worker's start.
DROP INDEX IF EXISTS anonymous_weather_sessions_installation;
