#!/usr/bin/env bash
# The gateway's throughput next to its yardsticks, in ONE run, through one nginx on loopback:
#   ceiling   nginx `return 200` (no upstream at all)
#   floor     a do-nothing libfcgi responder (../shared/bench/peers/c-hello) under spawn-fcgi
#   gateway   cached weather with a session token, cached weather with the legacy token,
#             session creation, refresh (each request spends a fresh refresh token)
#   limits    cached weather with every limit enabled at 10,000,000 (limiter and its SQLite
#             writes run, nothing is refused) vs all limits 0 (skip with --no-limits)
#   peer      the same four paths on another implementation of the API (--peer)
# and the ratios against the floor and the peer. Appends a dated section to bench/RESULTS.md.
#
# usage: bench/run.sh [--peer fastapi|unix:SOCK|http://HOST:PORT] [--no-limits] [--label TEXT]
#   --peer fastapi     start bench/peer-fastapi.sh and measure it behind the same nginx
#   --peer unix:SOCK   an already running HTTP peer on a unix socket, behind the same nginx
#   --peer URL         an already running peer at URL (its weather_cache must hold the benchmark
#                      point 31.2304,121.4737; its legacy token is PEER_LEGACY_TOKEN)
# Environment: DURATION (10s), CONNECTIONS (32), THREADS (2), WORKERS (2: gateway workers,
# spawn-fcgi children and uvicorn workers alike), NGINX_WORKERS (1), WARMUP (1s before each
# path), REFRESH_HEADROOM (3: refresh pairs seeded = headroom x creation rate x duration),
# GATEWAY_BIN (a built binary; default: build release into .build-bench), RESULTS (file),
# ROUNDS (5: interleaved floor / cached-weather rounds after the main pass; 0 skips them),
# ROUND_DURATION (5s each). With a peer, ROUNDS more rounds alternate creation and refresh between
# the gateway and the peer (gateway, peer, gateway, ...), and the median round ratio is reported
# beside the single-pass one: the peer's own pace moves from minute to minute.
source "$(dirname "$0")/lib.sh"

peer="" limits=1 label="" args=$(printf "%q " "$@"); args=${args% }
while [ $# -gt 0 ]; do
  case $1 in
    --peer) peer=$2; shift 2 ;;
    --no-limits) limits=0; shift ;;
    --limits) limits=1; shift ;;
    --label) label=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

export DURATION=${DURATION:-10s} CONNECTIONS=${CONNECTIONS:-32} THREADS=${THREADS:-2}
export WORKERS=${WORKERS:-2} NGINX_WORKERS=${NGINX_WORKERS:-1} WARMUP=${WARMUP:-1s}
ROUNDS=${ROUNDS:-5} ROUND_DURATION=${ROUND_DURATION:-5s}

bench_init run
build_gateway
start_fake_provider

gw_sock=$OUT/gw.sock hello_sock=$OUT/hello.sock peer_sock=""
gw_port=$(free_port) ceil_port=$(free_port) hello_port=$(free_port) peer_port=$(free_port)
[ "$gw_port" != "$ceil_port" ] && [ "$ceil_port" != "$hello_port" ] || die "port clash, run again"

# The yardsticks' server blocks, beside the shipped gateway server block in the same nginx.
extra=$OUT/extra-servers.conf
cat >"$extra" <<CONF
server {
  listen 127.0.0.1:$ceil_port;
  location / { default_type application/json; return 200 '{"status":"ok"}'; }
}
server {
  listen 127.0.0.1:$hello_port;
  location / {
    include /etc/nginx/fastcgi_params;
    fastcgi_pass unix:$hello_sock;
    fastcgi_keep_conn off;
  }
}
CONF
peer_url=""
case $peer in
  "") ;;
  fastapi|unix:*)
    if [ "$peer" = fastapi ]; then peer_sock=$OUT/peer/peer.sock; else peer_sock=${peer#unix:}; fi
    cat >>"$extra" <<CONF
server {
  listen 127.0.0.1:$peer_port;
  location / { proxy_pass http://unix:$peer_sock:; }
}
CONF
    peer_url="http://127.0.0.1:$peer_port" ;;
  http://*) peer_url=${peer%/} ;;
  *) die "--peer takes fastapi, unix:SOCK or http://HOST:PORT" ;;
esac

conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$gw_port" "$gw_sock" "$OUT/nginx" "$extra")
start_hello "$hello_sock" "$WORKERS"
db=$OUT/db/weather.sqlite3
start_gateway "$gw_sock" "$WORKERS" "$db" off
start_nginx "$conf"
gw="http://127.0.0.1:$gw_port"
wait_http "$gw/v1/health"

# A session for the cached-weather path, and the cache warmed by one request (one call to the
# fake provider); the benchmark requests then all read the SQLite cache (TTL one day).
create_session "$gw"
gw_access=$ACCESS_TOKEN
log "warm-up: $(weather_probe "$gw" "X-Weather-Session-Token: $gw_access")"
probe=$(weather_probe "$gw" "X-Weather-Session-Token: $gw_access")
[ "$probe" = "200 cache=hit" ] || die "cached weather is not a cache hit: $probe"
probe=$(weather_probe "$gw" "X-Weather-Token: $BENCH_LEGACY_TOKEN")
[ "$probe" = "200 cache=hit" ] || die "legacy weather is not a cache hit: $probe"
calls_before=$(fake_calls)

wrk_run ceiling "http://127.0.0.1:$ceil_port/" report.lua
wrk_run floor "http://127.0.0.1:$hello_port/" report.lua
api_paths gw "$gw" "$gw_access" "$BENCH_LEGACY_TOKEN"
calls_after=$(fake_calls)

if [ "$limits" = 1 ]; then
  # Same database (session and cache row), workers restarted with limits on but never refusing.
  stop_gateway "$gw_sock"
  start_gateway "$gw_sock" "$WORKERS" "$db" high
  wait_http "$gw/v1/health"
  probe=$(weather_probe "$gw" "X-Weather-Session-Token: $gw_access")
  [ "$probe" = "200 cache=hit" ] || die "limited cached weather is not a cache hit: $probe"
  wrk_run lim-weather-session "$(weather_url "$gw")" report.lua -H "X-Weather-Session-Token: $gw_access"
  # And limits off once more, so drift during the run shows and is averaged out.
  stop_gateway "$gw_sock"
  start_gateway "$gw_sock" "$WORKERS" "$db" off
  wait_http "$gw/v1/health"
  wrk_run gw-weather-session-2 "$(weather_url "$gw")" report.lua -H "X-Weather-Session-Token: $gw_access"
  # Interleaved pairs (limits off, then on, each a fresh start), so the cost does not rest on one
  # pair of passes taken minutes apart.
  for i in $(seq "$ROUNDS"); do
    for mode in off high; do
      stop_gateway "$gw_sock"
      start_gateway "$gw_sock" "$WORKERS" "$db" "$mode"
      wait_http "$gw/v1/health"
      DURATION=$ROUND_DURATION wrk_run "limits-$mode-r$i" "$(weather_url "$gw")" report.lua -H "X-Weather-Session-Token: $gw_access"
    done
  done
  stop_gateway "$gw_sock"
  start_gateway "$gw_sock" "$WORKERS" "$db" off
  wait_http "$gw/v1/health"
fi

# Interleaved rounds: the floor and cached weather (session token) alternately, ROUNDS times, so
# that the key ratio does not rest on one pair of measurements taken a minute apart on a noisy
# machine; the median round ratio is reported beside the single-pass one.
for i in $(seq "$ROUNDS"); do
  DURATION=$ROUND_DURATION wrk_run "floor-r$i" "http://127.0.0.1:$hello_port/" report.lua
  DURATION=$ROUND_DURATION wrk_run "gw-weather-session-r$i" "$(weather_url "$gw")" report.lua -H "X-Weather-Session-Token: $gw_access"
done

if [ -n "$peer" ]; then
  if [ "$peer" = fastapi ]; then
    PEER_DIR=$OUT/peer WEATHER_DB_PATH=$OUT/peer/peer.sqlite3 CLOSET_WEATHER_PROXY_TOKEN=$BENCH_LEGACY_TOKEN \
      "$BENCH_DIR/peer-fastapi.sh" --socket "$peer_sock" --workers "$WORKERS" >"$OUT/peer.log" 2>&1 &
    track $!
    for _ in $(seq 600); do [ -f "$OUT/peer/ready" ] && break; sleep 0.1; done
    [ -f "$OUT/peer/ready" ] || { cat "$OUT/peer.log" >&2; die "FastAPI peer did not start"; }
  fi
  wait_http "$peer_url/v1/weather"
  create_session "$peer_url"
  peer_access=$ACCESS_TOKEN
  probe=$(weather_probe "$peer_url" "X-Weather-Session-Token: $peer_access")
  [ "${probe%% *}" = 200 ] || die "peer cached weather answers $probe (is its weather_cache seeded?)"
  api_paths peer "$peer_url" "$peer_access" "${PEER_LEGACY_TOKEN:-$BENCH_LEGACY_TOKEN}"

  # Interleaved creation and refresh rounds against the peer, the peer first in even rounds. Each
  # side's refresh pairs are seeded once for every round and handed out a slice a round, so no
  # pair is spent twice: REFRESH_HEADROOM (here 2 unless set) times the main pass's creation pace
  # per round (refresh runs at creation's pace, give or take a fifth), as seeding takes as long
  # as spending.
  if [ "$ROUNDS" -gt 0 ]; then
    declare -A base_of=([gw]=$gw [peer]=$peer_url)
    for side in gw peer; do
      count=$(awk -v r="${RPS[$side-create]}" -v d="$(duration_seconds "$ROUND_DURATION")" -v h="${REFRESH_HEADROOM:-2}" -v n="$ROUNDS" \
        'BEGIN { printf "%d", r * d * h * n + 2000 }')
      seed_pairs "$side-rounds" "${base_of[$side]}" "$count"
      awk -v n="$ROUNDS" -v out="$OUT/pairs-$side-round" '{ print > (out "-" ((NR - 1) % n + 1) ".txt") }' "$OUT/pairs-$side-rounds.txt"
    done
    for i in $(seq "$ROUNDS"); do
      sides="gw peer"
      [ $((i % 2)) = 0 ] && sides="peer gw"
      for side in $sides; do
        DURATION=$ROUND_DURATION wrk_run "$side-create-r$i" "${base_of[$side]}/v1/weather/session" create.lua
      done
      for side in $sides; do
        PAIRS_FILE=$OUT/pairs-$side-round-$i.txt NO_WARMUP=1 DURATION=$ROUND_DURATION \
          wrk_run "$side-refresh-r$i" "${base_of[$side]}/v1/weather/session/refresh" refresh.lua
      done
    done
  fi
fi

# ---- report -----------------------------------------------------------------------------------
floor=${RPS[floor]}
lim_base=$(awk -v a="${RPS[gw-weather-session]}" -v b="${RPS[gw-weather-session-2]:-0}" 'BEGIN { print (b > 0) ? (a + b) / 2 : a }')
{
  results_header "bench/run.sh${label:+ ($label)}" "DURATION=$DURATION CONNECTIONS=$CONNECTIONS THREADS=$THREADS WORKERS=$WORKERS NGINX_WORKERS=$NGINX_WORKERS bench/run.sh $args"
  echo "wrk -t$THREADS -c$CONNECTIONS -d$DURATION through nginx ($NGINX_WORKERS worker) to $WORKERS responder processes on loopback; errors = HTTP >= 400 + socket errors, counted by wrk."
  echo "Gateway: limits off (all WEATHER_*_PER_* = 0) unless said otherwise; WEATHER_CACHE_TTL=86400, cache warmed by one request before measuring; provider calls during the gateway paths: $((calls_after - calls_before))."
  echo
  echo "| path | req/s | p50 ms | p99 ms | errors / requests | vs floor | vs peer |"
  echo "|---|---:|---:|---:|---:|---:|---:|"
  table_row "nginx return 200 (ceiling)" ceiling "$(ratio "${RPS[ceiling]}" "$floor")" ""
  table_row "c-hello libfcgi (floor)" floor "1.00" ""
  for p in weather-session weather-legacy create refresh; do
    table_row "gateway $p" "gw-$p" "$(ratio "${RPS[gw-$p]}" "$floor")" "$(ratio "${RPS[gw-$p]}" "${RPS[peer-$p]:-0}")"
  done
  if [ "$limits" = 1 ]; then
    table_row "gateway weather-session, limits off (again)" gw-weather-session-2 "$(ratio "${RPS[gw-weather-session-2]}" "$floor")" ""
    table_row "gateway weather-session, limits on (10,000,000)" lim-weather-session "$(ratio "${RPS[lim-weather-session]}" "$floor")" ""
  fi
  if [ -n "$peer" ]; then
    for p in weather-session weather-legacy create refresh; do
      table_row "peer ($peer) $p" "peer-$p" "$(ratio "${RPS[peer-$p]}" "$floor")" "1.00"
    done
  fi
  for n in "${!NOTE[@]}"; do [ -n "${NOTE[$n]}" ] && echo && echo "Note ($n): ${NOTE[$n]}"; done
  echo
  echo "Ratios (same run):"
  r=$(ratio "${RPS[gw-weather-session]}" "$floor"); echo "- cached weather (session) / floor: $r (target >= 0.7: $(verdict "$r" ">=" 0.7))"
  r=$(ratio "${RPS[gw-weather-legacy]}" "$floor"); echo "- cached weather (legacy) / floor: $r"
  r=$(ratio "${RPS[gw-create]}" "$floor"); echo "- session creation / floor: $r (target >= 0.4: $(verdict "$r" ">=" 0.4))"
  r=$(ratio "${RPS[gw-refresh]}" "$floor"); echo "- refresh / floor: $r (target >= 0.4: $(verdict "$r" ">=" 0.4))"
  if [ -n "$peer" ]; then
    r=$(ratio "${RPS[gw-weather-session]}" "${RPS[peer-weather-session]}"); echo "- cached weather (session) / peer: $r (target >= 4: $(verdict "$r" ">=" 4))"
    r=$(ratio "${RPS[gw-weather-legacy]}" "${RPS[peer-weather-legacy]}"); echo "- cached weather (legacy) / peer: $r"
    r=$(ratio "${RPS[gw-create]}" "${RPS[peer-create]}"); echo "- session creation / peer: $r (target >= 2.5: $(verdict "$r" ">=" 2.5))"
    r=$(ratio "${RPS[gw-refresh]}" "${RPS[peer-refresh]}"); echo "- refresh / peer: $r (target >= 2.5: $(verdict "$r" ">=" 2.5))"
    if [ "$ROUNDS" -gt 0 ]; then
      for p in create refresh; do
        rr=""
        for i in $(seq "$ROUNDS"); do rr="$rr $(ratio "${RPS[gw-$p-r$i]}" "${RPS[peer-$p-r$i]}")"; done
        echo "- $p / peer, $ROUNDS interleaved rounds of $ROUND_DURATION (gateway and peer alternately, the peer first in even rounds): round ratios$rr; median $(median "$rr") (target >= 2.5: $(verdict "$(median "$rr")" ">=" 2.5))"
      done
    fi
  fi
  if [ "$ROUNDS" -gt 0 ]; then
    rr=""
    for i in $(seq "$ROUNDS"); do rr="$rr $(ratio "${RPS[gw-weather-session-r$i]}" "${RPS[floor-r$i]}")"; done
    med=$(median "$rr")
    echo "- cached weather (session) / floor, $ROUNDS interleaved rounds of $ROUND_DURATION (floor, gateway, floor, ...): round ratios$rr; median $med (target >= 0.7: $(verdict "$med" ">=" 0.7))"
  fi
  if [ "$limits" = 1 ]; then
    cost=$(awk -v on="${RPS[lim-weather-session]}" -v off="$lim_base" 'BEGIN { if (on + 0 == 0 || off + 0 == 0) print "n/a"; else printf "%.1f", (1 - on / off) * 100 }')
    echo "- cost of the limits on cached weather: ${cost}% (limits on at 10,000,000 per hour/day, so the limiter and its store run and never refuse, vs the mean of the two limits-off runs, $lim_base req/s; target < 15%: $(verdict "$cost" "<" 15))"
    if [ "$ROUNDS" -gt 0 ]; then
      cc=""
      for i in $(seq "$ROUNDS"); do
        cc="$cc $(awk -v on="${RPS[limits-high-r$i]}" -v off="${RPS[limits-off-r$i]}" 'BEGIN { if (on + 0 == 0 || off + 0 == 0) print "n/a"; else printf "%.1f", (1 - on / off) * 100 }')"
      done
      med=$(median "$cc" %.1f)
      echo "- cost of the limits, $ROUNDS interleaved pairs of $ROUND_DURATION (limits off, then on, each a fresh start): per pair (%)$cc; median ${med}% (target < 15%: $(verdict "$med" "<" 15))"
    fi
  fi
} >"$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
cat "$OUT/section.md"
log "appended to $RESULTS"
