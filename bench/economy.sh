#!/usr/bin/env bash
# Provider economy: a simulated day of USERS (10,000) users spread over Shanghai (random points
# within 30 km of 31.23,121.47), each creating a session, asking 3-5 times for the weather at
# their own point and once for a trip (bench/lua/economy.lua), against the fake providers.
# The binary has no accelerated clock, so the whole day is compressed into one window shorter
# than WEATHER_CACHE_TTL (600 s): then "at most one provider call per grid cell and request kind
# per cache TTL" means provider calls (the fake's GET /_calls) <= distinct (0.05 cell, kind)
# pairs asked for, a forecast of any `days` being one kind (the cell's outlook, since session 16). Limits are on but raised to 10,000,000 (every session comes from 127.0.0.1).
#
# CAIYUN_MODE=day_not_turned runs the same day against a Caiyun whose series starts at the place's
# yesterday (as just after midnight, before its day has turned: every outlook a day short, so
# `days=15` needs a row of its own) and reports the calls that costs beyond the pairs instead of
# failing on them.
#
# usage: bench/economy.sh [--label TEXT]
# Environment: USERS (10000), ECON_THREADS (4 threads, one connection each), WORKERS (2),
# WEATHER_CACHE_TTL (600), CAIYUN_MODE (ok), GATEWAY_BIN, RESULTS. Exits non-zero when the
# assertion fails.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
users=${USERS:-10000} threads=${ECON_THREADS:-4} caiyun_mode=${CAIYUN_MODE:-ok}
export WORKERS=${WORKERS:-2} NGINX_WORKERS=${NGINX_WORKERS:-1} WEATHER_CACHE_TTL=${WEATHER_CACHE_TTL:-600}
export WEATHER_CACHE_STALE_TTL=${WEATHER_CACHE_STALE_TTL:-21600}
ttl=$WEATHER_CACHE_TTL

bench_init economy
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
db=$OUT/db/weather.sqlite3
start_gateway "$sock" "$WORKERS" "$db" high
start_nginx "$conf"
gw="http://127.0.0.1:$port"
wait_http "$gw/v1/health"
curl -s -X POST "$FAKE_URL/_reset" >/dev/null
[ "$caiyun_mode" = ok ] || curl -sf -X POST "$FAKE_URL/_mode?provider=caiyun&mode=$caiyun_mode" >/dev/null || die "the fake has no mode $caiyun_mode"

log "simulating $users users with $threads connections (must finish within the cache TTL, $ttl s)"
started=$(date +%s.%N)
ECON_OUT=$OUT/econ ECON_USERS=$users BENCH_THREADS=$threads \
  wrk -t"$threads" -c"$threads" -d"${ttl}s" -s "$BENCH_LUA/economy.lua" "$gw/v1/health" >"$OUT/wrk-economy.txt" 2>&1 &
wpid=$!
track "$wpid"
while kill -0 "$wpid" 2>/dev/null; do
  [ "$(ls "$OUT"/econ.*.done 2>/dev/null | wc -l)" -ge "$threads" ] && { kill -INT "$wpid" 2>/dev/null || true; break; }
  sleep 0.2
done
wait "$wpid" 2>/dev/null || true
ended=$(date +%s.%N)
elapsed=$(awk -v a="$started" -v b="$ended" 'BEGIN { printf "%.1f", b - a }')
[ "$(ls "$OUT"/econ.*.done 2>/dev/null | wc -l)" -ge "$threads" ] || die "the simulation did not finish within the cache TTL ($ttl s)"

sum() { grep -oh "\b$1=[0-9]*" "$OUT"/econ.*.done | cut -d= -f2 | awk '{ s += $1 } END { print s + 0 }'; }
requests=$(sum requests) creates=$(sum create_ok) weather=$(sum weather_ok) trips=$(sum trip_ok)
errors=$(sum errors) hits=$(sum hit) misses=$(sum miss) stale=$(sum stale) resent=$(sum resent)
statuses=$( (grep -oh "status_[0-9]*=[0-9]*" "$OUT"/econ.*.done || true) | sed 's/status_//' \
  | awk -F= '{ a[$1] += $2 } END { for (k in a) printf "%s%s x%d", (n++ ? ", " : ""), k, a[k] }')
cat "$OUT"/econ.*.keys >"$OUT/keys.txt"
pairs=$(sort -u "$OUT/keys.txt" | wc -l)
weather_cells=$(grep '|forecast' "$OUT/keys.txt" | cut -d'|' -f1 | sort -u | wc -l)
trip_pairs=$(grep '|trip:' "$OUT/keys.txt" | sort -u | wc -l)
trip_cells=$(grep '|trip:' "$OUT/keys.txt" | cut -d'|' -f1 | sort -u | wc -l)
all_cells=$(cut -d'|' -f1 "$OUT/keys.txt" | sort -u | wc -l)
curl -s "$FAKE_URL/_calls" >"$OUT/calls.json"
read -r calls caiyun vc <<<"$(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
print(len(c), sum(1 for x in c if x["provider"] == "caiyun"), sum(1 for x in c if x["provider"] == "visualcrossing"))' "$OUT/calls.json")"
cache_rows=$(sqlite3 "$db" "SELECT count(*) FROM weather_cache")
ok=$(( calls <= pairs ))
in_ttl=$(awk -v e="$elapsed" -v t="$ttl" 'BEGIN { print (e < t) ? 1 : 0 }')

{
  results_header "bench/economy.sh${label:+ ($label)}" "USERS=$users ECON_THREADS=$threads WORKERS=$WORKERS WEATHER_CACHE_TTL=$ttl CAIYUN_MODE=$caiyun_mode bench/economy.sh $args"
  echo "$users simulated users within 30 km of 31.23,121.47 (session, 3-5 weather requests at their own point with days 1, 3, 7 or 15, one trip to one of 10 cities 7-60 days ahead), compressed into $elapsed s (cache TTL $ttl s), $threads connections, $WORKERS workers, limits on at 10,000,000, fake providers."
  echo
  echo "| users | requests | errors | distinct cells | distinct (cell, kind) | provider calls (Caiyun + VC) | cache rows | hit / miss / stale |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---|"
  echo "| $users | $requests | $errors | $all_cells ($weather_cells home + $trip_cells trip cities) | $pairs ($trip_pairs trips) | $calls ($caiyun + $vc) | $cache_rows | $hits / $misses / $stale |"
  echo
  echo "- sessions created $creates, weather answers $weather, trip answers $trips; error statuses: ${statuses:-none}; requests wrk dropped unsent and the script sent again: $resent"
  echo "- provider calls per request: $(ratio "$calls" "$requests"); calls <= distinct (cell, kind) pairs: $([ "$ok" = 1 ] && echo yes || echo NO); whole run within one cache TTL: $([ "$in_ttl" = 1 ] && echo yes || echo NO)"
  echo "- Caiyun (first in the order; asked only for cells' outlooks, trips past its 15 days go to Visual Crossing) calls per distinct cell: $caiyun for $all_cells cells ($([ "$caiyun" -le "$all_cells" ] && echo "at most one each" || echo "MORE than one each"))"
  [ "$caiyun_mode" = ok ] || echo "- Caiyun in mode \`$caiyun_mode\`: $caiyun calls for $weather_cells home cells and the trips within 13 days, $(( caiyun - weather_cells )) beyond one a home cell"
} >"$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
cat "$OUT/section.md"
log "appended to $RESULTS"
[ "$caiyun_mode" != ok ] && ok=1  # a lagging provider costs more: reported above, not a failure
[ "$ok" = 1 ] && [ "$in_ttl" = 1 ] && [ "$errors" = 0 ] || die "economy check failed (calls $calls, pairs $pairs, errors $errors, ${elapsed}s)"
