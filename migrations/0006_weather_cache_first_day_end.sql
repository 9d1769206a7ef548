-- When a cached forecast's first day ends at its place (the place's next midnight after the
-- fetch, as a UTC instant in unix seconds), for rows whose provider sent an offset; NULL for
-- trips and for rows written before this migration. A stale copy served after that midnight
-- (the providers failing, or another worker fetching the cell) leaves out the days that have
-- ended instead of answering with yesterday as `daily[0]`. Adding a nullable column rewrites
-- nothing, and an older release, which names its columns, still writes the table.
ALTER TABLE weather_cache ADD COLUMN first_day_ends_at INTEGER;
