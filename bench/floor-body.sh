#!/usr/bin/env bash
# Where the gap between the floor and cached weather goes. In ROUNDS (3) rounds of ROUND (5s):
# c-hello (the floor: a 15-byte body), the same do-nothing responder answering as many bytes as
# the gateway's cached weather response (bench/floor-body.c), and the gateway's cached weather with
# a session token. For each: req/s, and CPU microseconds per request of the two responder
# processes and of nginx's worker (utime + stime from /proc/PID/stat over the round).
# Not a target: the issue's floor stays c-hello; this only says how much of the gap is size.
#
# usage: bench/floor-body.sh [--label TEXT]
# Environment: ROUNDS (3), ROUND (5s), GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
rounds=${ROUNDS:-3} round=${ROUND:-5s}
export NGINX_WORKERS=1
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

bench_init floorbody
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_gateway "$sock" 2 "$OUT/db/weather.sqlite3" off
gw="http://127.0.0.1:$port"
hport=$(free_port) bport=$(free_port)
start_hello "$OUT/hello.sock" 2
hello_pids=$(cat "$OUT/hello.pid")

# The sized floor: built here, started like the floor, answering the gateway's response size.
cc -O2 -o "$OUT/floor-body" "$BENCH_DIR/floor-body.c" -lfcgi || die "cannot build floor-body.c"
fcgi_server "$conf" "$hport" "$OUT/hello.sock"
fcgi_server "$conf" "$bport" "$OUT/body.sock"
start_nginx "$conf"
wait_http "$gw/v1/health"
create_session "$gw"
header="X-Weather-Session-Token: $ACCESS_TOKEN"
weather_probe "$gw" "$header" >/dev/null
bytes=$(curl -s -o /dev/null -w '%{size_download}' "$(weather_url "$gw")" -H "$header")
FLOOR_BODY_BYTES=$bytes spawn-fcgi -s "$OUT/body.sock" -M 0666 -F 2 -P "$OUT/body.pid" -- "$OUT/floor-body" >"$OUT/body.log" 2>&1
for p in $(cat "$OUT/body.pid"); do track "$p"; done
wait_socket "$OUT/body.sock"
body_pids=$(cat "$OUT/body.pid")
gw_pids=$(pgrep -P "$GATEWAY_PID" | tr '\n' ' ')
[ "$(curl -s -o /dev/null -w '%{size_download}' "http://127.0.0.1:$bport/")" = "$bytes" ] || die "the sized floor does not answer $bytes bytes"

for r in $(seq "$rounds"); do
  ROUND=$round measure_cpu "floor-$r" "http://127.0.0.1:$hport/" report.lua "$hello_pids"
  ROUND=$round measure_cpu "sized-$r" "http://127.0.0.1:$bport/" report.lua "$body_pids"
  ROUND=$round measure_cpu "gateway-$r" "$(weather_url "$gw")" report.lua "$gw_pids" -H "$header"
done

{
  results_header "bench/floor-body.sh${label:+ ($label)}" "ROUNDS=$rounds ROUND=$round bench/floor-body.sh $args"
  echo "wrk -t2 -c32 through nginx (1 worker) to 2 responder processes; CPU per request from /proc/PID/stat (utime + stime) over each measurement. The sized floor answers $bytes bytes, the size of the gateway's cached weather response; c-hello answers 15."
  echo
  echo "| round | floor req/s | sized floor req/s | cached weather req/s | cached / floor | cached / sized floor | µs/req responders: floor, sized, gateway | µs/req nginx: floor, sized, gateway |"
  echo "|---:|---:|---:|---:|---:|---:|---|---|"
  for r in $(seq "$rounds"); do
    echo "| $r | ${RPS[floor-$r]} | ${RPS[sized-$r]} | ${RPS[gateway-$r]} | $(ratio "${RPS[gateway-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[gateway-$r]}" "${RPS[sized-$r]}") | ${US[floor-$r]}, ${US[sized-$r]}, ${US[gateway-$r]} | ${NGX[floor-$r]}, ${NGX[sized-$r]}, ${NGX[gateway-$r]} |"
  done
} >>"$RESULTS"
log "appended to $RESULTS"
