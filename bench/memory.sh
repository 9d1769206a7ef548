#!/usr/bin/env bash
# Memory of one gateway worker: VmRSS (/proc/PID/status) right after start and after REQUESTS
# (100,000) mixed requests through nginx: cached weather with session and legacy tokens, session
# creation, refresh, health (bench/lua/mixed.lua). Targets: <= 20 MB, < 1 MB growth.
# One worker (weather-fcgi --workers 1 is the worker itself, no supervisor). Limits are on at
# 10,000,000 so the limiter runs without refusing. wrk runs in rounds of ROUND (5s) until the
# total reaches REQUESTS; RSS is sampled after every round, so a leak shows as a trend.
#
# usage: bench/memory.sh [--label TEXT]
# Environment: REQUESTS (100000), ROUND (5s), CONNECTIONS (32), THREADS (2), GATEWAY_BIN, RESULTS,
# SMAPS_DIR (if set, /proc/PID/smaps is copied there at start, after warming, after the first round
# and at the end, to see which mappings grew).
source "$(dirname "$0")/lib.sh"

bench_args "$@"
requests=${REQUESTS:-100000} round=${ROUND:-5s}
export CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2} NGINX_WORKERS=${NGINX_WORKERS:-1}

bench_init memory
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_gateway "$sock" 1 "$OUT/db/weather.sqlite3" high
worker=$GATEWAY_PID
sleep 0.5
snapshot() { [ -z "${SMAPS_DIR:-}" ] || { mkdir -p "$SMAPS_DIR"; cp "/proc/$worker/smaps" "$SMAPS_DIR/$1.smaps"; }; }
rss_start=$(rss_kb "$worker") split_start=$(rss_split "$worker"); snapshot start
start_nginx "$conf"
gw="http://127.0.0.1:$port"
wait_http "$gw/v1/health"

# Eight points in and around Shanghai, each warmed into the cache by one request.
points="31.2304,121.4737;31.1443,121.8083;31.3960,121.2460;30.9100,121.4700;31.2200,121.5500;31.0500,121.2200;31.3000,121.6000;31.1700,121.3900"
IFS=';' read -ra plist <<<"$points"
for p in "${plist[@]}"; do
  code=$(curl -s -o /dev/null -w '%{http_code}' "$gw/v1/weather?lat=${p%,*}&lon=${p#*,}" -H "X-Weather-Token: $BENCH_LEGACY_TOKEN")
  [ "$code" = 200 ] || die "warming $p answered $code"
done
rss_warm=$(rss_kb "$worker") split_warm=$(rss_split "$worker"); snapshot warm
log "worker $worker: VmRSS $rss_start kB after start, $rss_warm kB after warming the cache"

total=0 errors=0 samples="" rss_first=""
while [ "$total" -lt "$requests" ]; do
  MIX_POINTS=$points LEGACY_TOKEN=$BENCH_LEGACY_TOKEN BENCH_THREADS=$THREADS \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$round" -s "$BENCH_LUA/mixed.lua" "$gw/v1/health" >"$OUT/wrk-round.txt" 2>&1
  line=$(grep '^BENCH ' "$OUT/wrk-round.txt" | tail -1)
  [ -n "$line" ] || { cat "$OUT/wrk-round.txt" >&2; die "wrk printed no BENCH line"; }
  cat "$OUT/wrk-round.txt" >>"$OUT/wrk-all.txt"
  total=$(( total + $(kv requests "$line") ))
  errors=$(( errors + $(kv http_errors "$line") + $(kv socket_errors "$line") ))
  kill -0 "$worker" 2>/dev/null || die "the worker died (pid $worker)"
  rss=$(rss_kb "$worker")
  [ -n "$rss_first" ] || { rss_first=$rss; first_total=$total; split_first=$(rss_split "$worker"); snapshot first; }
  samples+="${samples:+, }$total: $rss"
  log "  $total requests ($(kv rps "$line") req/s), errors $errors, VmRSS $rss kB"
done
rss_end=$(rss_kb "$worker") split_end=$(rss_split "$worker"); snapshot end
served=$(sqlite3 "$OUT/db/weather.sqlite3" "SELECT count(*) FROM anonymous_weather_sessions" 2>/dev/null || echo "?")

mb() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
growth_start=$(( rss_end - rss_start )) growth_first=$(( rss_end - rss_first ))
{
  results_header "bench/memory.sh${label:+ ($label)}" "REQUESTS=$requests ROUND=$round CONNECTIONS=$CONNECTIONS THREADS=$THREADS bench/memory.sh $args"
  echo "One worker (weather-fcgi --workers 1) behind nginx; limits on at 10,000,000 (never refuse); mix: 40% cached weather with session tokens (8 cached cells), 20% legacy, 15% create, 15% refresh, 10% health; wrk -t$THREADS -c$CONNECTIONS in rounds of $round."
  echo
  echo "| measure | VmRSS | of which |"
  echo "|---|---:|---|"
  echo "| after start (no request yet) | $rss_start kB ($(mb "$rss_start") MB) | $split_start |"
  echo "| after warming 8 cache cells | $rss_warm kB ($(mb "$rss_warm") MB) | $split_warm |"
  echo "| after the first round ($first_total requests) | $rss_first kB ($(mb "$rss_first") MB) | $split_first |"
  echo "| after $total mixed requests | $rss_end kB ($(mb "$rss_end") MB) | $split_end |"
  echo
  echo "- errors: $errors of $total requests; sessions in the database at the end: $served"
  echo "- growth over the run: $growth_start kB from start, $growth_first kB from the end of the first round (target < 1 MB: $(verdict "$growth_first" "<" 1024) from the first round, $(verdict "$growth_start" "<" 1024) from start)"
  echo "- VmRSS at the end vs target <= 20 MB: $(mb "$rss_end") MB ($(verdict "$rss_end" "<=" 20480)); file-backed pages (the shared libraries, mostly) are shared by all workers, anonymous ones are each worker's own"
  echo "- VmRSS in kB after each round (requests so far: kB): $samples"
} >"$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
cat "$OUT/section.md"
log "appended to $RESULTS"
