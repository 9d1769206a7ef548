#!/usr/bin/env bash
# What a prune costs the requests served meanwhile: a database of SESSIONS sessions (3 token rows
# each), DOOMED_PERCENT of them revoked long ago (on 2026-02-01), served by 2 workers through nginx (limits
# off): cached weather with a session token (wrk -t1 -c8) and a session creation every 50 ms
# (a probe), for DURATION, once without a prune and once with `weatherctl prune` started as the
# load starts (a fresh copy of the database each time). Reports the weather's req/s and p50/p99,
# the creations' p50/p99/max and the prune's wall time. The prune's transactions hold the write
# lock that every creation (and every counter flush) waits for.
# usage: SESSIONS=200000 DOOMED_PERCENT=60 DURATION=20s bench/prune-load.sh [--label TEXT]
#        (GATEWAY_BIN=.../weather-fcgi measures another build; weatherctl is taken from beside it)
source "$(dirname "$0")/lib.sh"
bench_args "$@"
bench_init prune-load
build_gateway
WEATHERCTL_BIN=${WEATHERCTL_BIN:-$(dirname "$GATEWAY_BIN")/weatherctl}
if [ ! -x "$WEATHERCTL_BIN" ]; then
  scratch=${BENCH_SCRATCH:-$BENCH_ROOT/.build-bench}
  log "building weatherctl (release, $scratch)"
  (cd "$BENCH_ROOT" && swift build -c release --scratch-path "$scratch" --product weatherctl) >>"$OUT/build.log" 2>&1 || die "cannot build weatherctl"
  WEATHERCTL_BIN="$(cd "$BENCH_ROOT" && swift build -c release --scratch-path "$scratch" --show-bin-path)/weatherctl"
fi
sessions=${SESSIONS:-200000} doomed=${DOOMED_PERCENT:-60} duration=${DURATION:-20s}
start_fake_provider

# The seeded database, made once: migrated by a first start, then filled.
seed=$OUT/seed/w.sqlite3 sock=$OUT/gw.sock
start_gateway "$sock" 1 "$seed" off seed
stop_gateway "$sock"
log "seeding $sessions sessions, $doomed% revoked long ago (on 2026-02-01)"
seed_doomed_sessions "$seed" "$sessions" "$doomed"

# creation_probe SECONDS BASE: one creation every 50 ms; prints "n p50_ms p99_ms max_ms failed".
creation_probe() {
  python3 - "$1" "$2" <<'EOF'
import sys, time, json, uuid, urllib.request, urllib.error
dur, base = float(sys.argv[1]), sys.argv[2]; lat = []; bad = 0; end = time.time() + dur
while time.time() < end:
    body = json.dumps({"platform": "ios", "installationId": str(uuid.uuid4())}).encode()
    req = urllib.request.Request(base + "/v1/weather/session", data=body, headers={"Content-Type": "application/json"})
    t0 = time.time()
    try:
        with urllib.request.urlopen(req, timeout=30) as r: r.read(); ok = r.status == 201
    except (urllib.error.HTTPError, urllib.error.URLError): ok = False
    lat.append((time.time() - t0) * 1000); bad += not ok
    time.sleep(0.05)
lat.sort(); n = len(lat)
print("%d %.1f %.1f %.1f %d" % (n, lat[n // 2], lat[max(0, int(n * 0.99) - 1)], lat[-1], bad))
EOF
}

rows=()
for phase in without with; do
  db=$OUT/$phase/w.sqlite3
  mkdir -p "$OUT/$phase" && cp "$seed" "$db"
  port=$(free_port)
  conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx-$phase")
  start_gateway "$sock" 2 "$db" off "gateway-$phase"
  start_nginx "$conf"
  base="http://127.0.0.1:$port"
  wait_http "$base/v1/health"
  create_session "$base"
  weather_probe "$base" "X-Weather-Session-Token: $ACCESS_TOKEN" >/dev/null  # warms the cell
  prune_wall=-
  if [ $phase = with ]; then
    ( env WEATHER_CONFIG="$OUT/empty.conf" WEATHER_DB_PATH="$db" /usr/bin/time -f '%e' -o "$OUT/prune-time.txt" \
        "$WEATHERCTL_BIN" prune >"$OUT/prune.txt" 2>&1 ) &
    prune_job=$!
  fi
  creation_probe "$(duration_seconds "$duration")" "$base" >"$OUT/probe-$phase.txt" &
  probe_job=$!
  THREADS=1 CONNECTIONS=8 DURATION=$duration NO_WARMUP=1 wrk_run "weather-$phase" "$(weather_url "$base")" report.lua -H "X-Weather-Session-Token: $ACCESS_TOKEN"
  wait "$probe_job"
  if [ $phase = with ]; then
    wait "$prune_job" || { cat "$OUT/prune.txt" >&2; die "prune failed"; }
    prune_wall=$(cat "$OUT/prune-time.txt")
    deleted=$(awk '/^TOTAL/ { print $2 }' "$OUT/prune.txt")
  fi
  read -r cn c50 c99 cmax cbad <"$OUT/probe-$phase.txt"
  rows+=("| $phase a prune | ${RPS[weather-$phase]} | ${P50[weather-$phase]} | ${P99[weather-$phase]} | ${ERRS[weather-$phase]} | $cn | $c50 | $c99 | $cmax | $cbad | $prune_wall |")
  stop_pid "$NGINX_PID"
  stop_gateway "$sock"
done
log "prune deleted ${deleted:-?} rows"
{
  results_header "bench/prune-load.sh${label:+ ($label)}" "SESSIONS=$sessions DOOMED_PERCENT=$doomed DURATION=$duration bench/prune-load.sh $args"
  echo "2 workers through nginx, limits off; $sessions sessions ($((sessions * 3)) token rows), $doomed% of them revoked long ago (on 2026-02-01) (the prune deleted ${deleted:-?} rows). Cached weather: wrk -t1 -c8 -d$duration with one session token; creations: one every 50 ms (a probe)."
  echo
  echo "| phase | weather req/s | p50 ms | p99 ms | errors | creations | p50 ms | p99 ms | max ms | failed | prune wall s |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} >>"$RESULTS"
log "results appended to $RESULTS"
