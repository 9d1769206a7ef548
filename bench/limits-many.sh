#!/usr/bin/env bash
# The cost of the limits on cached weather as production sees it: each request with the next of
# SESSIONS (40,000) session access tokens, so that every session's own bucket is cold (taken from
# about once every few seconds, never twice within a second on one worker, so never leased) and
# each take is the bucket's own. bench/run.sh's limits row uses one token, whose bucket is leased.
# ROUNDS (3) interleaved pairs: the gateway started with limits off, then with every limit at
# 10,000,000 (the limiter runs, never refuses), each a fresh start on the same database, wrk
# through nginx with bench/lua/weather-many.lua. Target (issue 7): < 15% cost.
#
# usage: bench/limits-many.sh [--label TEXT]
# Environment: SESSIONS (40000), ROUNDS (3), DURATION (8s), CONNECTIONS (32), THREADS (2),
# WORKERS (2), GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
sessions=${SESSIONS:-40000} rounds=${ROUNDS:-3}
export DURATION=${DURATION:-8s} CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2}
export WORKERS=${WORKERS:-2} NGINX_WORKERS=${NGINX_WORKERS:-1} WARMUP=${WARMUP:-1s} MANY_TOKENS=$sessions

bench_init limits-many
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_nginx "$conf"
gw="http://127.0.0.1:$port"
db=$OUT/db/weather.sqlite3

start_gateway "$sock" "$WORKERS" "$db" off
wait_http "$gw/v1/health"
create_session "$gw"
weather_probe "$gw" "X-Weather-Session-Token: $ACCESS_TOKEN" >/dev/null
probe=$(weather_probe "$gw" "X-Weather-Session-Token: $ACCESS_TOKEN")
[ "$probe" = "200 cache=hit" ] || die "cached weather is not a cache hit: $probe"
seed_pairs many "$gw" "$sessions"
stop_gateway "$sock"

costs=""
for i in $(seq "$rounds"); do
  for mode in off high; do
    start_gateway "$sock" "$WORKERS" "$db" "$mode" "gateway-$mode"
    wait_http "$gw/v1/health"
    PAIRS_FILE=$OUT/pairs-many.txt wrk_run "$mode-$i" "$(weather_url "$gw")" weather-many.lua
    stop_gateway "$sock"
  done
  costs+="$(awk -v off="${RPS[off-$i]}" -v on="${RPS[high-$i]}" 'BEGIN { if (off + 0 == 0) print "n/a"; else printf "%.1f", (1 - on / off) * 100 }') "
done
med=$(median "$costs" "%.1f")

{
  results_header "bench/limits-many.sh${label:+ ($label)}" "SESSIONS=$sessions ROUNDS=$rounds DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS WORKERS=$WORKERS bench/limits-many.sh $args"
  echo "Cached weather, each request with the next of $sessions session tokens (every session's bucket cold), $WORKERS workers; limits off vs every limit at 10,000,000, $rounds interleaved pairs, each run a fresh start on the same database."
  echo
  echo "| run | req/s | p50 (ms) | p99 (ms) | errors / requests |"
  echo "|---|---:|---:|---:|---:|"
  for i in $(seq "$rounds"); do
    table_row "pair $i, limits off" "off-$i"
    table_row "pair $i, limits on" "high-$i"
  done
  echo
  echo "- cost of the limits per pair (%): ${costs% }; median ${med}% (target < 15%: $(verdict "$med" "<" 15))"
} >"$OUT/section.md"
cat "$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
log "appended to $RESULTS"
