-- When each periodic maintenance task last started, in unix seconds: `weatherctl prune` (the
-- prune timer, cron, an operator) and the workers record the clean-up here, so that a host
-- without the timer (shared hosting) still gets it once a day from one worker, and a host with
-- it gets no second run from the workers.
CREATE TABLE IF NOT EXISTS weather_maintenance (
  task TEXT PRIMARY KEY,
  started_at INTEGER NOT NULL
) WITHOUT ROWID;
