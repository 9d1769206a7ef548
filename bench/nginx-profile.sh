#!/usr/bin/env bash
# The instructions nginx spends on a request, by site. nginx runs as one process
# (`master_process off`) under valgrind's callgrind while wrk -t1 -c4 asks DURATION (8s) of
# /v1/weather through: the shipped site (deploy/nginx/closet-weather.conf as scripts/nginx-conf.sh
# wraps it for the benchmarks), and the floor's site (`include fastcgi_params`, as bench/run.sh
# serves c-hello). Both pass to the same do-nothing responder answering FLOOR_BODY_BYTES (1700,
# about a cached weather answer; bench/floor-body.c), so only nginx's side differs. Instructions
# a request: the run's total (nginx's start-up included, a few hundred a request) divided by the
# requests wrk counted. Instruction counts do not move with the machine's load, unlike req/s.
# With PATCH (a sed expression) a third run applies it to the shipped site first, to weigh a
# change, e.g. the request id passed before session 29:
#   PATCH='s|^\( *\)fastcgi_pass unix:\(.*\)/body.sock;$|\1fastcgi_param HTTP_X_REQUEST_ID $request_id;\n&|'
#
# usage: bench/nginx-profile.sh [--label TEXT]
# Environment: DURATION (8s), FLOOR_BODY_BYTES (1700), PATCH, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
duration=${DURATION:-8s} bytes=${FLOOR_BODY_BYTES:-1700}
bench_init nginxprofile
command -v valgrind >/dev/null || die "valgrind missing (WITH_BENCH=1 scripts/install-deps.sh)"

cc -O2 -o "$OUT/floor-body" "$BENCH_DIR/floor-body.c" -lfcgi || die "cannot build floor-body.c"
sock=$OUT/body.sock
FLOOR_BODY_BYTES=$bytes spawn-fcgi -s "$sock" -M 0666 -F 1 -P "$OUT/body.pid" -- "$OUT/floor-body" >"$OUT/body.log" 2>&1
for p in $(cat "$OUT/body.pid"); do track "$p"; done
wait_socket "$sock"
shipped_port=$(free_port) floor_port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$shipped_port" "$sock" "$OUT/nginx")
fcgi_server "$conf" "$floor_port" "$sock"

declare -A INSTR REQS
# profile NAME PORT: one callgrind run of nginx while wrk asks PORT; sets INSTR[NAME], REQS[NAME].
profile() {
  local name=$1 port=$2 pid n total
  valgrind --tool=callgrind --callgrind-out-file="$OUT/callgrind-$name.out" \
    nginx -c "$conf" -p "$OUT/nginx" -g 'master_process off;' >"$OUT/nginx-$name.log" 2>&1 &
  pid=$!
  track "$pid"
  wait_http "http://127.0.0.1:$port/v1/weather?lat=1&lon=2"
  n=$(wrk -t1 -c4 -d"$duration" "http://127.0.0.1:$port/v1/weather?lat=$BENCH_LAT&lon=$BENCH_LON" | awk '/requests in/ { print $1 }')
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  [ -n "$n" ] && [ "$n" -gt 0 ] || die "$name: wrk counted no requests"
  total=$(callgrind_annotate "$OUT/callgrind-$name.out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(/,/, "", $1); print $1 }')
  INSTR[$name]=$((total / n))
  REQS[$name]=$n
  log "$name: $n requests, ${INSTR[$name]} instructions a request"
}

profile shipped "$shipped_port"
profile floor-site "$floor_port"
if [ -n "${PATCH:-}" ]; then
  cp "$OUT/nginx/server.conf" "$OUT/server.conf.shipped"
  sed -i -e "$PATCH" "$OUT/nginx/server.conf"
  cmp -s "$OUT/nginx/server.conf" "$OUT/server.conf.shipped" && die "PATCH changed nothing in the shipped site"
  profile patched "$shipped_port"
fi

{
  results_header "bench/nginx-profile.sh${label:+ ($label)}" "DURATION=$duration FLOOR_BODY_BYTES=$bytes${PATCH:+ PATCH='$PATCH'} bench/nginx-profile.sh $args"
  echo "nginx as one process under valgrind --tool=callgrind, wrk -t1 -c4 -d$duration to /v1/weather, a do-nothing responder answering $bytes bytes behind each site; instructions a request = the run's total / the requests wrk counted."
  echo
  echo "| site | requests | instructions a request |"
  echo "|---|---:|---:|"
  echo "| shipped (deploy/nginx/closet-weather.conf) | ${REQS[shipped]} | ${INSTR[shipped]} |"
  echo "| the floor's (include fastcgi_params) | ${REQS[floor-site]} | ${INSTR[floor-site]} |"
  [ -z "${PATCH:-}" ] || echo "| shipped with PATCH | ${REQS[patched]} | ${INSTR[patched]} |"
} >>"$RESULTS"
log "appended to $RESULTS"
