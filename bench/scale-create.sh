#!/usr/bin/env bash
# Session creation on an empty database and on one of SESSIONS (1,000,000) sessions (seeded as
# bench/scale.sh seeds it), in ROUNDS (3) alternated rounds of DURATION (8s): big, empty, big,
# empty, ... each on a freshly started gateway (2 workers, limits off). Creation is the path
# bench/scale.sh finds losing the most on the big database, and one pass of it is noisy; the
# alternation pairs each big round with an empty one taken just after it. For each round:
# req/s, p99, the workers' CPU per creation (user and system, checkpointer threads included),
# the whole machine's idle and iowait, the bytes the workers wrote (/proc/PID/io write_bytes:
# into the page cache) and the disks took (/proc/diskstats, sectors written by every disk but
# loop and zram devices) per creation, and the WAL's size when the round ended.
#
# usage: bench/scale-create.sh [--label TEXT]
# Environment: SESSIONS (1000000), ROUNDS (3), DURATION (8s), WORKERS (2), GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
sessions=${SESSIONS:-1000000} rounds=${ROUNDS:-3} duration=${DURATION:-8s} workers=${WORKERS:-2}
export NGINX_WORKERS=1

bench_init scale-create
build_gateway
start_fake_provider
hz=$(getconf CLK_TCK)
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_nginx "$conf"
gw="http://127.0.0.1:$port"

declare -A DB
DB[empty]=$OUT/empty/weather.sqlite3
DB[big]=$OUT/big/weather.sqlite3
for k in empty big; do  # migrated by the gateway itself
  start_gateway "$sock" 1 "${DB[$k]}" off
  wait_http "$gw/v1/health"
  stop_gateway "$sock"
done
seed_big_db "${DB[big]}" "$sessions"
log "seeded in ${SEED_SECONDS}s: $(du -m "${DB[big]}" | cut -f1) MB"

# Bytes the workers wrote (write_bytes of each worker process, its threads included).
worker_written() {
  local p w=0
  for p in $(pgrep -P "$GATEWAY_PID"); do w=$((w + $(awk '/^write_bytes/ { print $2 }' "/proc/$p/io" 2>/dev/null || echo 0))); done
  echo "$w"
}
# Sectors (512 bytes) written by the machine's disks: whole disks only (a partition or a
# device-mapper volume would count the same writes twice), not loop, RAM or zram devices.
disk_sectors() {
  local dev s=0 n
  while read -r _ _ dev _ _ _ _ _ _ n _; do
    case $dev in loop*|ram*|zram*|dm-*|md*) continue ;; esac
    [ -d "/sys/block/$dev" ] || continue  # partitions are not in /sys/block
    s=$((s + n))
  done </proc/diskstats
  echo "$s"
}

rows=()
declare -A SUM
for round in $(seq 1 "$rounds"); do
  for k in big empty; do
    start_gateway "$sock" "$workers" "${DB[$k]}" off "gateway-$k"
    wait_http "$gw/v1/health"
    read -r u0 s0 < <(worker_ticks)
    c0=$(head -1 /proc/stat) b0=$(worker_written) d0=$(disk_sectors)
    line=$(BENCH_THREADS=2 wrk -t2 -c32 -d"$duration" -s "$BENCH_LUA/create.lua" "$gw/v1/weather/session" 2>&1 \
      | tee "$OUT/wrk-$k-$round.txt" | grep '^BENCH ') || die "wrk printed no BENCH line"
    read -r u1 s1 < <(worker_ticks)
    c1=$(head -1 /proc/stat) b1=$(worker_written) d1=$(disk_sectors)
    n=$(kv requests "$line")
    read -r idle iowait total < <(paste -d' ' <(echo "$c0") <(echo "$c1") | awk '{
      t0 = 0; t1 = 0; for (i = 2; i <= 9; i++) { t0 += $i; t1 += $(i + 11) }  # guest time is in user already
      print $16 - $5, $17 - $6, t1 - t0 }')
    wal=$(stat -c %s "${DB[$k]}-wal" 2>/dev/null || echo 0)
    rps=$(kv rps "$line")
    SUM[$k]=$(awk -v a="${SUM[$k]:-0}" -v b="$rps" 'BEGIN { print a + b }')
    us() { awk -v t="$1" -v hz="$hz" -v n="$n" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }'; }
    pct() { awk -v a="$1" -v b="$total" 'BEGIN { printf "%.0f%%", 100 * a / b }'; }
    kb() { awk -v b="$1" -v n="$n" 'BEGIN { printf "%.1f", b / 1024 / n }'; }
    rows+=("| $round | $k | $rps | $(awk -v u="$(kv p99_us "$line")" 'BEGIN { printf "%.1f", u / 1000 }') | $(us $((u1 - u0))) + $(us $((s1 - s0))) | $(pct "$idle") | $(pct "$iowait") | $(kb $((b1 - b0))) / $(kb $(((d1 - d0) * 512))) | $((wal / 1048576)) | $(( $(kv http_errors "$line") + $(kv socket_errors "$line") )) |")
    log "round $round $k: $rps req/s, worker µs/creation $(us $((u1 - u0))) user + $(us $((s1 - s0))) system, idle $(pct "$idle"), iowait $(pct "$iowait"), KB written per creation $(kb $((b1 - b0))) by the workers, $(kb $(((d1 - d0) * 512))) to disk"
    stop_gateway "$sock"
  done
done
loss=$(awk -v e="${SUM[empty]}" -v b="${SUM[big]}" 'BEGIN { printf "%.1f", 100 * (1 - b / e) }')

{
  results_header "bench/scale-create.sh${label:+ ($label)}" "SESSIONS=$sessions ROUNDS=$rounds DURATION=$duration WORKERS=$workers bench/scale-create.sh $args"
  echo "Session creation through nginx (1 worker), wrk -t2 -c32 -d$duration, $workers workers, limits off; an empty database and one seeded with $sessions sessions ($((sessions * 3)) token rows, as bench/scale.sh seeds it), alternated (big first in each round), a fresh gateway each time. CPU from /proc ($hz Hz ticks): the supervisor and workers with their checkpointer threads; idle and iowait of the whole machine."
  echo
  echo "| round | database | req/s | p99 ms | worker µs per creation (user + system) | machine idle | iowait | KB per creation written by the workers / by the disks | WAL MiB at the end | errors |"
  echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${rows[@]}"
  echo
  echo "- creation on the big database vs the empty one, mean of the rounds: ${loss}% loss (bench/scale.sh's target for every path: <= 10%)"
} >>"$RESULTS"
log "creation loss on the big database: ${loss}%"
log "appended to $RESULTS"
