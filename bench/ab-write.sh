#!/usr/bin/env bash
# Two gateway builds side by side on the write paths: session creation and refresh, in ROUNDS (3)
# interleaved rounds of ROUND_SECONDS (4) each (A create, B create, A refresh, B refresh, ...), so
# both see the same machine. Each build has its own database, migrated by itself, and its own
# nginx; 2 workers each, limits as LIMITS says (off), wrk -t2 -c32. Refresh pairs are seeded first and split per
# round. For a change to the write path (schema, transactions): A the build before, B after.
# With SESSIONS=N each database first gets N sessions as bench/scale.sh's big one does (about
# 1.2 GB and 30 s per million, twice).
#
# usage: A_BIN=old/weather-fcgi B_BIN=new/weather-fcgi bench/ab-write.sh [--label TEXT]
# With WEATHER=1 each round also runs cached weather with a session token (the cache warmed by
# one request), for a change that touches every request (the FastCGI loop).
# Environment: A_BIN, B_BIN (required), ROUNDS (3), ROUND_SECONDS (4), SESSIONS (0), WEATHER (0), LIMITS (off,
# or high: every quota on at 10,000,000, so the limiter's statements run without refusing),
# PAIRS_PER_SECOND (9000: refresh pairs seeded per second of refresh; a round that runs out says
# so, and its refresh figure is then a ceiling, not a measurement), SPREAD_ADDRESSES (0; 1: each
# creation from its own address, X-Forwarded-For trusted from loopback, so that with LIMITS=high
# every creation takes its address's bucket from the store, as in production), RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
[ -x "${A_BIN:-}" ] && [ -x "${B_BIN:-}" ] || die "set A_BIN and B_BIN to two weather-fcgi builds"
rounds=${ROUNDS:-3} secs=${ROUND_SECONDS:-4}
export THREADS=2 CONNECTIONS=32 DURATION=${secs}s NGINX_WORKERS=1 WORKERS=2
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

bench_init abwrite
start_fake_provider
declare -A PORT
for v in A B; do
  bin_var=${v}_BIN
  GATEWAY_BIN=${!bin_var}
  sock=$OUT/gw$v.sock port=$(free_port)
  conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx$v")
  if [ "${SESSIONS:-0}" -gt 0 ]; then
    start_gateway "$sock" 1 "$OUT/db$v/weather.sqlite3" "${LIMITS:-off}" "gateway$v"  # migrates it
    stop_gateway "$sock"
    seed_big_db "$OUT/db$v/weather.sqlite3" "$SESSIONS"
  fi
  start_gateway "$sock" 2 "$OUT/db$v/weather.sqlite3" "${LIMITS:-off}" "gateway$v"
  start_nginx "$conf"
  wait_http "http://127.0.0.1:$port/v1/health"
  PORT[$v]=$port
  if [ "${WEATHER:-0}" = 1 ]; then
    create_session "http://127.0.0.1:$port"
    declare "ACCESS_$v=$ACCESS_TOKEN"
    weather_probe "http://127.0.0.1:$port" "X-Weather-Session-Token: $ACCESS_TOKEN" >/dev/null
    probe=$(weather_probe "http://127.0.0.1:$port" "X-Weather-Session-Token: $ACCESS_TOKEN")
    [ "$probe" = "200 cache=hit" ] || die "cached weather on $v is not a cache hit: $probe"
  fi
  REFRESH_HEADROOM=$rounds seed_pairs "$v" "http://127.0.0.1:$port" $((rounds * secs * ${PAIRS_PER_SECOND:-9000}))
  split -n "l/$rounds" -d -a 3 "$OUT/pairs-$v.txt" "$OUT/pairs-$v.round"
done

paths="create refresh"
[ "${WEATHER:-0}" = 1 ] && paths+=" weather"
declare -A RATE P99
for r in $(seq "$rounds"); do
  for path in $paths; do
    for v in A B; do
      url="http://127.0.0.1:${PORT[$v]}/v1/weather/session" script=$path.lua extra=()
      [ "$path" = refresh ] && url+=/refresh
      if [ "$path" = weather ]; then
        access_var=ACCESS_$v
        url=$(weather_url "http://127.0.0.1:${PORT[$v]}") script=report.lua extra=(-H "X-Weather-Session-Token: ${!access_var}")
      fi
      line=$(PAIRS_FILE=$OUT/pairs-$v.round$(printf %03d $((r - 1))) BENCH_THREADS=2 BENCH_SPREAD=${SPREAD_ADDRESSES:-0} \
        wrk -t2 -c32 -d"${secs}s" -s "$BENCH_LUA/$script" "${extra[@]}" "$url" 2>&1 | tee "$OUT/wrk-$r-$path-$v.txt" | grep '^BENCH ') \
        || die "wrk $path $v printed no BENCH line"
      grep -q '^NOTE ' "$OUT/wrk-$r-$path-$v.txt" && log "warning: $path $v round $r: $(grep '^NOTE ' "$OUT/wrk-$r-$path-$v.txt")"
      RATE[$r-$path-$v]=$(kv rps "$line")
      P99[$r-$path-$v]=$(awk -v us="$(kv p99_us "$line")" 'BEGIN { printf "%.1f", us / 1000 }')
      log "round $r $path $v: ${RATE[$r-$path-$v]} req/s, p99 ${P99[$r-$path-$v]} ms, errors $(( $(kv http_errors "$line") + $(kv socket_errors "$line") ))"
    done
  done
done

seeded=""
[ "${SESSIONS:-0}" -gt 0 ] && seeded=" Each database held $SESSIONS seeded sessions (3 tokens each) at the start."
{
  results_header "bench/ab-write.sh${label:+ ($label)}" "A_BIN=$A_BIN B_BIN=$B_BIN ROUNDS=$rounds ROUND_SECONDS=$secs SESSIONS=${SESSIONS:-0} WEATHER=${WEATHER:-0} LIMITS=${LIMITS:-off} SPREAD_ADDRESSES=${SPREAD_ADDRESSES:-0} bench/ab-write.sh $args"
  echo "Interleaved rounds of ${secs} s, wrk -t2 -c32 through nginx (1 worker) to 2 workers per build, limits ${LIMITS:-off}; req/s (p99 ms), B / A per round.$seeded"
  echo
  if [ "${WEATHER:-0}" = 1 ]; then
    echo "| round | creation A | creation B | B / A | refresh A | refresh B | B / A | cached weather A | cached weather B | B / A |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  else
    echo "| round | creation A | creation B | B / A | refresh A | refresh B | B / A |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
  fi
  for r in $(seq "$rounds"); do
    row="| $r | ${RATE[$r-create-A]} (${P99[$r-create-A]}) | ${RATE[$r-create-B]} (${P99[$r-create-B]}) | $(ratio "${RATE[$r-create-B]}" "${RATE[$r-create-A]}") | ${RATE[$r-refresh-A]} (${P99[$r-refresh-A]}) | ${RATE[$r-refresh-B]} (${P99[$r-refresh-B]}) | $(ratio "${RATE[$r-refresh-B]}" "${RATE[$r-refresh-A]}") |"
    [ "${WEATHER:-0}" = 1 ] && row+=" ${RATE[$r-weather-A]} (${P99[$r-weather-A]}) | ${RATE[$r-weather-B]} (${P99[$r-weather-B]}) | $(ratio "${RATE[$r-weather-B]}" "${RATE[$r-weather-A]}") |"
    echo "$row"
  done
} >>"$RESULTS"
log "appended to $RESULTS"
