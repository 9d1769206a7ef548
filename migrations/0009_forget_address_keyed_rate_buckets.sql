-- Rate buckets of client addresses were keyed by the address itself (create_ip:198.51.100.7), so
-- a database counting them here (without the table the workers share in memory: a read-only
-- folder, a full disk when the -writer file was made, another release's -writer file) held the
-- addresses of the last hour's clients, where the privacy notice promises a keyed hash. From this
-- release on the key holds 16 hex digits of a SipHash of the address keyed from the server key
-- (Limiter.addressKey). This forgets the buckets keyed the old way, which nothing reads any more:
-- each such address's quotas are full again, once. A worker of the release before, still
-- serving during a rolling upgrade, may write a few more; they lapse within the hour and the
-- clean-up deletes them.
DELETE FROM weather_rate_limits
 WHERE bucket_key GLOB 'create_ip:*' OR bucket_key GLOB 'weather_ip:*' OR bucket_key GLOB 'legacy_ip:*';
