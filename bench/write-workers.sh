#!/usr/bin/env bash
# Session creation with 1, 2, 3, 4 workers (WORKER_COUNTS), one wrk run each: req/s, p99, and
# where the machine's CPU went (/proc: the workers, user and system; the whole machine's idle
# and iowait). Creation is one serialised stream of SQLite commits; this shows how far adding
# workers helps it and how much of a worker's time is system calls. Not a target.
#
# usage: bench/write-workers.sh [--label TEXT]
# Environment: WORKER_COUNTS ("1 2 3 4"), DURATION (10s), GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
counts=${WORKER_COUNTS:-1 2 3 4} duration=${DURATION:-10s}
export NGINX_WORKERS=1

bench_init write-workers
build_gateway
start_fake_provider
hz=$(getconf CLK_TCK)

cpu_line() { head -1 /proc/stat; }

rows=()
for n in $counts; do
  sock=$OUT/gw$n.sock port=$(free_port)
  conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx$n")
  start_gateway "$sock" "$n" "$OUT/db$n/weather.sqlite3" off "gateway$n"
  start_nginx "$conf"
  wait_http "http://127.0.0.1:$port/v1/health"
  read -r u0 s0 < <(worker_ticks) ; c0=$(cpu_line)
  line=$(BENCH_THREADS=2 wrk -t2 -c32 -d"$duration" -s "$BENCH_LUA/create.lua" "http://127.0.0.1:$port/v1/weather/session" 2>&1 \
    | tee "$OUT/wrk-$n.txt" | grep '^BENCH ') || die "wrk printed no BENCH line"
  read -r u1 s1 < <(worker_ticks) ; c1=$(cpu_line)
  requests=$(kv requests "$line")
  read -r idle iowait total < <(paste -d' ' <(echo "$c0") <(echo "$c1") | awk '{
    t0 = 0; t1 = 0; for (i = 2; i <= 11; i++) { t0 += $i; t1 += $(i + 11) }
    print $16 - $5, $17 - $6, t1 - t0 }')
  us_user=$(awk -v t=$((u1 - u0)) -v hz="$hz" -v n="$requests" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')
  us_sys=$(awk -v t=$((s1 - s0)) -v hz="$hz" -v n="$requests" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')
  pct() { awk -v a="$1" -v b="$total" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
  rows+=("| $n | $(kv rps "$line") | $(awk -v us="$(kv p99_us "$line")" 'BEGIN { printf "%.1f", us / 1000 }') | $((u1 - u0 + s1 - s0)) | $us_user + $us_sys | $(pct "$idle") | $(pct "$iowait") | $(( $(kv http_errors "$line") + $(kv socket_errors "$line") )) |")
  log "$n worker(s): $(kv rps "$line") req/s, worker CPU per creation ${us_user} µs user + ${us_sys} µs system, machine idle $(pct "$idle"), iowait $(pct "$iowait")"
  stop_pid "$NGINX_PID"
  stop_gateway "$sock"
done

{
  results_header "bench/write-workers.sh${label:+ ($label)}" "WORKER_COUNTS=\"$counts\" DURATION=$duration bench/write-workers.sh $args"
  echo "Session creation through nginx (1 worker), wrk -t2 -c32 -d$duration, limits off, a fresh database per worker count. CPU from /proc (clock ticks of $hz Hz): the workers' processes including their checkpointer threads; idle and iowait of the whole 2-core machine."
  echo
  echo "| workers | req/s | p99 ms | worker CPU ticks | worker µs per creation (user + system) | machine idle | iowait | errors |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
} >>"$RESULTS"
log "appended to $RESULTS"
