#!/usr/bin/env bash
# Where a worker spends its instructions on one path: one worker (limits off, or LIMITS=high)
# under `valgrind --tool=callgrind` behind nginx answers cached weather requests with a session
# token (PATH_KIND=session; or legacy, or create: session creation, or refresh: each request
# spending one of PAIRS (8000: a 20 s run under valgrind spends about 5,000) refresh tokens seeded first, with the counters zeroed after the
# seeding) for PROFILE_DURATION (20s, a few thousand requests at valgrind's pace); then
# callgrind_annotate's top functions by inclusive cost go to bench/RESULTS.md (top 10) and
# bench/out/profile-*/annotate.txt (top 60). Instruction counts, not time: memory and syscall
# waits do not show.
#
# usage: bench/profile.sh [--label TEXT]
# With SESSIONS=N the database first gets N sessions as bench/scale.sh's big one does, to see
# what a big database costs a path in instructions.
# Environment: PROFILE_DURATION (20s), PATH_KIND (session | legacy | create | refresh), LIMITS
# (off | high), PAIRS (refresh only), SESSIONS (0), GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
command -v valgrind >/dev/null || die "valgrind missing (WITH_BENCH=1 scripts/install-deps.sh)"
duration=${PROFILE_DURATION:-20s} kind=${PATH_KIND:-session} limits=${LIMITS:-off}

bench_init profile
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
seeded=""
if [ "${SESSIONS:-0}" -gt 0 ]; then
  seeded=1
  start_gateway "$sock" 1 "$OUT/db/weather.sqlite3" "$limits"  # migrates it
  stop_gateway "$sock"
  seed_big_db "$OUT/db/weather.sqlite3" "$SESSIONS"
fi
gateway_env "$OUT/db/weather.sqlite3" "$limits"
mkdir -p "$OUT/db"
: >"$OUT/empty.conf"
env "${GW_ENV[@]}" WEATHER_CONFIG="$OUT/empty.conf" valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind.out" \
  "$GATEWAY_BIN" --listen "$sock" --socket-mode 0666 --workers 1 2>"$OUT/gateway.log" &
vpid=$!
track "$vpid"
for _ in $(seq 600); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || die "the worker under valgrind did not start"
start_nginx "$conf"
gw="http://127.0.0.1:$port"
wait_http "$gw/v1/health"
create_session "$gw"
case $kind in
  legacy) header="X-Weather-Token: $BENCH_LEGACY_TOKEN" what="cached weather (legacy token)" ;;
  session) header="X-Weather-Session-Token: $ACCESS_TOKEN" what="cached weather (session token)" ;;
  create) header="X-Weather-Session-Token: $ACCESS_TOKEN" what="session creation" ;;
  refresh) header="X-Weather-Session-Token: $ACCESS_TOKEN" what="refresh" ;;
  *) die "PATH_KIND takes session, legacy, create or refresh" ;;
esac
weather_probe "$gw" "$header" >/dev/null
probe=$(weather_probe "$gw" "$header")
[ "$probe" = "200 cache=hit" ] || die "not a cache hit: $probe"

log "profiling $what for $duration"
if [ "$kind" = create ]; then
  wrk -t1 -c1 -d"$duration" -s "$BENCH_LUA/create.lua" "$gw/v1/weather/session" >"$OUT/wrk.txt" 2>&1
elif [ "$kind" = refresh ]; then
  THREADS=1 CONNECTIONS=4 DURATION=$duration seed_pairs profile "$gw" "${PAIRS:-8000}"
  callgrind_control -z "$vpid" >/dev/null  # count the refreshes only, not the seeding
  PAIRS_FILE=$OUT/pairs-profile.txt BENCH_THREADS=1 \
    wrk -t1 -c1 -d"$duration" -s "$BENCH_LUA/refresh.lua" "$gw/v1/weather/session/refresh" >"$OUT/wrk.txt" 2>&1
  grep -q '^NOTE' "$OUT/wrk.txt" && log "warning: $(grep -m1 '^NOTE' "$OUT/wrk.txt") (set PAIRS higher)"
else
  wrk -t1 -c1 -d"$duration" -s "$BENCH_LUA/report.lua" -H "$header" "$(weather_url "$gw")" >"$OUT/wrk.txt" 2>&1
fi
line=$(grep '^BENCH ' "$OUT/wrk.txt")
requests=$(kv requests "$line")
stop_pid "$vpid"
[ -s "$OUT/callgrind.out" ] || die "no callgrind output"
callgrind_annotate --inclusive=yes --threshold=100 "$OUT/callgrind.out" 2>/dev/null >"$OUT/annotate-full.txt"
head -80 "$OUT/annotate-full.txt" >"$OUT/annotate.txt"
total=$(grep -m1 'PROGRAM TOTALS' "$OUT/annotate-full.txt" | awk '{ print $1 }')
# The function lines, "  1,234 (12.34%)  file:function [object]": the function demangled, each
# once (callgrind lists inlined code under two file names), without the start-up spine (libc's
# and main's frames, the closures that only forward) that sits at ~100% and says nothing.
top=$(grep -E '^ *[0-9,]+ \([ 0-9.]+%\) ' "$OUT/annotate-full.txt" | grep -v 'PROGRAM TOTALS' \
  | sed -E 's/^ *([0-9,]+) \( *([0-9.]+)%\)  [^:]*:(.*)$/\1\t\2\t\3/; s/ \[[^]]*\]$//' \
  | swift demangle --simplified \
  | awk -F'\t' -v r="$requests" '!seen[$3]++ && $3 !~ /^0x|below main|__libc_start|weather_fcgi_main|^serve\(listenFD:\)$|^partial apply|closure #/ {
      c = $1; gsub(",", "", c); printf "%6s%%  %9d instr/request  %s\n", $2, c / r, $3 }' | head -"${TOP:-12}" || true)
handle=$(grep -m1 'Gateway.handle' <<<"$top" | awk '{ print $2 }')

span="over the worker's whole life (start-up included)"
[ "$kind" = refresh ] && span="from the end of the seeding of ${PAIRS:-8000} sessions on"
{
  results_header "bench/profile.sh${label:+ ($label)}" "PROFILE_DURATION=$duration PATH_KIND=$kind LIMITS=$limits${seeded:+ SESSIONS=$SESSIONS} bench/profile.sh $args"
  echo "One worker under valgrind --tool=callgrind, $requests requests of $what (limits $limits) through nginx (wrk -t1 -c1)${seeded:+ on a database seeded with $SESSIONS sessions}; total $total instructions $span; Gateway.handle: ${handle:-?} instructions per request. Top functions by inclusive instructions (callgrind_annotate --inclusive=yes; % of that total, instructions divided by the $requests requests):"
  echo
  echo '```'
  echo "$top"
  echo '```'
} >"$OUT/section.md"
cat "$OUT/section.md" >>"$RESULTS"
cat "$OUT/section.md"
log "appended to $RESULTS; full listing in $OUT/annotate-full.txt"
