-- Every allowed request rewrites its bucket's tat_ms; the index on it doubled the pages each of
-- those writes touches, for the benefit of the pruning job only, which can scan this small table.
DROP INDEX IF EXISTS weather_rate_limits_tat;
