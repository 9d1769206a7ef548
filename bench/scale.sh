#!/usr/bin/env bash
# The gateway's paths on an empty database and on one holding SESSIONS (1,000,000) sessions, in
# one run: 3 token rows per session (1 access, 2 refresh of which one revoked) and one
# rate-limit bucket per session, inserted with sqlite3 in one transaction (recursive CTE,
# randomblob hex hashes) before the workers start. Reports the loss per path (target <= 10%) and
# EXPLAIN QUERY PLAN of the hot queries with the index that serves each.
# Paths: cached weather (one session token; and MANY_TOKENS (1000) different session tokens in
# turn, so lookups spread over the token index, on a gateway restarted after the refresh path so
# that it does not pay for that path's deferred last_seen_at writes; the stop's duration is
# reported), legacy, creation, refresh, and cached weather with limits on at 10,000,000 (never
# refusing). Then, on the same database with the gateway stopped, the write floor
# (bench/floor-write.c, as many processes as WORKERS): the rows a creation writes and nothing else,
# a rough yardstick for the loss SQLite's deeper B-trees cost any writer.
#
# usage: bench/scale.sh [--label TEXT]
# Environment: SESSIONS (1000000), ORDER ("empty big big empty": the phases in order, each
# database's figures averaged, so a linear drift of the machine cancels), DURATION (10s),
# CONNECTIONS (32), THREADS (2),
# WORKERS (2), WARMUP (1s), KEEP_DB (0: the databases are deleted at the end), GATEWAY_BIN,
# RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
sessions=${SESSIONS:-1000000} order=${ORDER:-empty big big empty}
export DURATION=${DURATION:-10s} CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2}
export WORKERS=${WORKERS:-2} NGINX_WORKERS=${NGINX_WORKERS:-1} WARMUP=${WARMUP:-1s} MANY_TOKENS=${MANY_TOKENS:-1000}

bench_init scale
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
wport=$(free_port) wsock=$OUT/write.sock
fcgi_server "$conf" "$wport" "$wsock"
build_write_floor
start_nginx "$conf"
gw="http://127.0.0.1:$port"

# A migrated database: the gateway itself applies the migrations (one worker, then stopped).
migrated_db() {
  start_gateway "$sock" 1 "$1" off
  wait_http "$gw/v1/health"
  stop_gateway "$sock"
}

declare -A DB
DB[empty]=$OUT/empty/weather.sqlite3
DB[big]=$OUT/big/weather.sqlite3
migrated_db "${DB[empty]}"
migrated_db "${DB[big]}"

seed_big_db "${DB[big]}" "$sessions"
insert_s=$SEED_SECONDS
big_size=$(du -m "${DB[big]}" | cut -f1)
rows=$(sqlite3 "${DB[big]}" "SELECT (SELECT count(*) FROM anonymous_weather_sessions) || ' sessions, ' || (SELECT count(*) FROM weather_session_tokens) || ' tokens, ' || (SELECT count(*) FROM weather_rate_limits) || ' rate-limit rows'")
log "inserted in ${insert_s}s: $rows, ${big_size} MB"

# One phase: every path on one database. Results are keyed NAME-ROUND-PATH.
phase() {
  local name=$1 round=$2 db=${DB[$1]} k="$1-$2"
  start_gateway "$sock" "$WORKERS" "$db" off "gateway-$name"
  wait_http "$gw/v1/health"
  create_session "$gw"
  local access=$ACCESS_TOKEN probe
  weather_probe "$gw" "X-Weather-Session-Token: $access" >/dev/null
  probe=$(weather_probe "$gw" "X-Weather-Session-Token: $access")
  [ "$probe" = "200 cache=hit" ] || die "$name: cached weather is not a cache hit: $probe"
  api_paths "$k" "$gw" "$access" "$BENCH_LEGACY_TOKEN"
  # The refresh path leaves each refreshed session's last_seen_at to be written after later
  # responses (64 rows per transaction); a fresh start writes that backlog on the way down, so the
  # next path measures itself. How long the stop took is reported (it writes the backlog, and the
  # last worker to close its connection checkpoints the WAL).
  local t0=$(date +%s.%N)
  stop_gateway "$sock"
  DRAIN[$k]=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  log "  stopping after the refresh path took ${DRAIN[$k]} s"
  start_gateway "$sock" "$WORKERS" "$db" off "gateway-$name"
  wait_http "$gw/v1/health"
  PAIRS_FILE=$OUT/pairs-$k.txt wrk_run "$k-weather-many" "$(weather_url "$gw")" weather-many.lua
  stop_gateway "$sock"
  start_gateway "$sock" "$WORKERS" "$db" high "gateway-$name"
  wait_http "$gw/v1/health"
  wrk_run "$k-lim-weather-session" "$(weather_url "$gw")" report.lua -H "X-Weather-Session-Token: $access"
  stop_gateway "$sock"
  start_write_floor "$wsock" "$WORKERS" 1 "$db" 400
  wrk_run "$k-write-floor" "http://127.0.0.1:$wport/" create.lua
  local p
  for p in $WRITE_PIDS; do stop_pid "$p"; done
}

declare -A ROUNDS DRAIN
round=0
for name in $order; do
  [ -n "${DB[$name]:-}" ] || die "ORDER takes empty and big"
  round=$((round + 1))
  ROUNDS[$name]="${ROUNDS[$name]:-} $round"
  log "phase $round: $name database"
  phase "$name" "$round"
done

# Mean req/s and worst p99 of one path over the rounds of one database.
mean_rps() { local s="" r; for r in ${ROUNDS[$1]}; do s+="${RPS[$1-$r-$2]} "; done; awk '{ for (i = 1; i <= NF; i++) t += $i; printf "%.1f", t / NF }' <<<"$s"; }
max_p99() { local s="" r; for r in ${ROUNDS[$1]}; do s+="${P99[$1-$r-$2]} "; done; awk '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i; printf "%.2f", m }' <<<"$s"; }
sum_err() { local t=0 r; for r in ${ROUNDS[$1]}; do t=$(( t + ${ERRS[$1-$r-$2]} )); done; echo "$t"; }

plan() {  # plan LABEL SQL
  local out
  out=$(sqlite3 "${DB[big]}" "EXPLAIN QUERY PLAN $2" 2>&1)
  echo "$1:"
  echo
  echo '```'
  echo "$2"
  echo "$out"
  echo '```'
  echo
  local served="" idx cols
  while read -r idx; do
    [ -n "$idx" ] || continue
    cols=$(sqlite3 "${DB[big]}" "SELECT group_concat(name, ', ') FROM pragma_index_info('$idx')")
    served+="${served:+; }index $idx (on $cols)"
  done < <(grep -o 'USING [A-Z ]*INDEX [A-Za-z_0-9]*' <<<"$out" | awk '{ print $NF }')
  while read -r idx; do
    [ -n "$idx" ] && served+="${served:+; }$idx"
  done < <(grep -o 'SEARCH [A-Za-z_0-9]* USING PRIMARY KEY ([^)]*)\|SCAN [A-Za-z_0-9]*' <<<"$out" | sed 's/^SEARCH \([A-Za-z_0-9]*\) USING/the \1/')
  echo "Served by: $served"
  echo
}

{
  results_header "bench/scale.sh${label:+ ($label)}" "SESSIONS=$sessions ORDER=\"$order\" DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS WORKERS=$WORKERS bench/scale.sh $args"
  echo "Big database: $rows (1 access + 2 refresh tokens, one revoked, and 1 weather_session rate-limit bucket per session), inserted with sqlite3 in one transaction in ${insert_s} s; file ${big_size} MB. Phases in order: $order. wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $WORKERS workers, limits off except the last row (10,000,000: the limiter runs, never refuses)."
  echo
  echo "| path | empty req/s | big req/s | loss | p99 empty / big (ms) | errors empty / big |"
  echo "|---|---:|---:|---:|---:|---:|"
  for p in weather-session weather-many weather-legacy create refresh lim-weather-session write-floor; do
    e=$(mean_rps empty "$p") b=$(mean_rps big "$p")
    loss=$(awk -v e="$e" -v b="$b" 'BEGIN { printf "%.1f", (1 - b / e) * 100 }')
    target=$(verdict "$loss" "<=" 10); [ "$p" = write-floor ] && target="not a target"
    echo "| $p | $e | $b | ${loss}% ($target) | $(max_p99 empty "$p") / $(max_p99 big "$p") | $(sum_err empty "$p") / $(sum_err big "$p") |"
  done
  for n in "${!NOTE[@]}"; do [ -n "${NOTE[$n]}" ] && echo && echo "Note ($n): ${NOTE[$n]}"; done
  echo
  echo "write-floor: not the gateway: bench/floor-write.c, $WORKERS single-threaded processes writing a creation's rows (a session and two tokens, one transaction each) on the same database, nothing else; its loss is what the big database costs a writer that does nothing else (a rough yardstick: it runs slower than the gateway, its checkpoints inline)."
  echo
  echo "weather-many: cached weather with $MANY_TOKENS different session tokens in turn, on a gateway started afresh after the refresh path (whose sessions' last_seen_at writes are left for later responses; the stop writes them). Loss = 1 - big/empty (negative: the big database was faster, i.e. noise)."
  drains=""
  for k in "${!DRAIN[@]}"; do drains+="${drains:+, }$k ${DRAIN[$k]} s"; done
  echo
  echo "Stopping the gateway after the refresh path (the workers write that path's last_seen_at backlog; the last to close checkpoints the WAL): $drains."
  echo
  echo "EXPLAIN QUERY PLAN on the big database:"
  echo
  plan "Token lookup (authentication, refresh)" "SELECT t.session_id, t.token_type, t.expires_at, t.revoked_at IS NOT NULL, s.status = 'active', s.last_seen_at FROM weather_session_tokens t JOIN anonymous_weather_sessions s ON s.id = t.session_id WHERE t.token_hash = ?1"
  plan "Cache lookup" "SELECT body, fetched_at, fresh_until, first_day_ends_at FROM weather_cache WHERE cache_key = ?1 AND stale_until > ?2"
  plan "Rate limit" "SELECT tat_ms FROM weather_rate_limits WHERE bucket_key = ?1"
  plan "Grid cells of a session" "SELECT first_seen_ms FROM weather_session_cells WHERE session_id = ?1 AND cell = ?2"
} >"$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
cat "$OUT/section.md"
log "appended to $RESULTS"
# The databases are large (about 1.4 GB per million sessions): kept only with KEEP_DB=1.
[ "${KEEP_DB:-0}" = 1 ] || rm -rf "$OUT/empty" "$OUT/big"
