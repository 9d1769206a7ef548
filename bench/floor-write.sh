#!/usr/bin/env bash
# How fast the process model lets session creation and refresh go. In ROUNDS (3) rounds of ROUND (5s), each through
# nginx: c-hello (the floor, GET, 2 processes); bench/floor-write.c as the write floor (2 processes
# of one thread: c-hello plus the rows a creation writes, one SQLite transaction a request, the
# gateway's schema and durability settings, nothing else); the same with group commit
# (GROUP_PROCESSES (1) processes of GROUP_THREADS (16) threads sharing one connection, one
# transaction for all the requests waiting); and the gateway's session creation (2 workers; POST,
# the same bodies as the write floors'). Then the same for refresh: the write floor writing what a
# refresh writes (FLOOR_WRITE_KIND=refresh, 2 processes) and the gateway's refresh (each request
# spending a fresh refresh token, seeded before each round as bench/run.sh does). For each: req/s,
# p99, errors, and CPU microseconds per request of the responder processes (threads included) and
# of nginx's worker.
# With MEMORY_DIR (default /dev/shm, if it is writable; empty to skip) the write floor also runs
# on a database there: a RAM file system, no disk at all, which no deployment would use; it says
# how much of the write floor's pace is the disk's file system.
# Not a target: it says how much of the gap between creation and 0.4 x the floor any worker with
# the gateway's process model (single-threaded, its own SQLite connection) would also have, and how
# much group commit would buy.
#
# usage: bench/floor-write.sh [--label TEXT]
# Environment: ROUNDS (3), ROUND (5s), GROUP_PROCESSES (1), GROUP_THREADS (16), MEMORY_DIR,
# GATEWAY_BIN, RESULTS.
source "$(dirname "$0")/lib.sh"

bench_args "$@"
rounds=${ROUNDS:-3} round=${ROUND:-5s} group_processes=${GROUP_PROCESSES:-1} group_threads=${GROUP_THREADS:-16}
export NGINX_WORKERS=1
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

bench_init floorwrite
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_gateway "$sock" 2 "$OUT/db/weather.sqlite3" off
gw="http://127.0.0.1:$port"
hport=$(free_port) wport=$(free_port) gport=$(free_port) rport=$(free_port) mport=$(free_port)
memory_dir=${MEMORY_DIR-/dev/shm}
[ -n "$memory_dir" ] && { [ -d "$memory_dir" ] && [ -w "$memory_dir" ] || memory_dir=""; }
mdb=""
if [ -n "$memory_dir" ]; then
  mdb=$(mktemp -d "$memory_dir/floor-write.XXXXXX")
  BENCH_DIRS+=("$mdb")  # removed at exit, after the processes using it
fi
start_hello "$OUT/hello.sock" 2
hello_pids=$(cat "$OUT/hello.pid")

# The write floors' databases, each with the gateway's migrations applied.
mkdir -p "$OUT/wdb"
for db in write grouped refresh; do
  cat "$BENCH_ROOT"/migrations/*.sql | sqlite3 "$OUT/wdb/$db.sqlite3" || die "cannot apply the migrations"
done
fcgi_server "$conf" "$hport" "$OUT/hello.sock"
fcgi_server "$conf" "$wport" "$OUT/write.sock"
fcgi_server "$conf" "$gport" "$OUT/grouped.sock"
fcgi_server "$conf" "$rport" "$OUT/refresh.sock"
[ -z "$mdb" ] || fcgi_server "$conf" "$mport" "$OUT/memory.sock"
start_nginx "$conf"
wait_http "$gw/v1/health"
bytes=$(curl -s -o /dev/null -w '%{size_download}' -X POST "$gw/v1/weather/session" -H 'Content-Type: application/json' \
  -d "{\"platform\":\"ios\",\"appVersion\":\"1.0\",\"installationId\":\"$(cat /proc/sys/kernel/random/uuid)\"}")
start_write_floor "$OUT/write.sock" 2 1 "$OUT/wdb/write.sqlite3" "$bytes"
write_pids=$WRITE_PIDS
start_write_floor "$OUT/grouped.sock" "$group_processes" "$group_threads" "$OUT/wdb/grouped.sqlite3" "$bytes"
grouped_pids=$WRITE_PIDS
FLOOR_WRITE_KIND=refresh start_write_floor "$OUT/refresh.sock" 2 1 "$OUT/wdb/refresh.sqlite3" "$bytes"
refresh_pids=$WRITE_PIDS
if [ -n "$mdb" ]; then
  cat "$BENCH_ROOT"/migrations/*.sql | sqlite3 "$mdb/write.sqlite3" || die "cannot apply the migrations in $mdb"
  start_write_floor "$OUT/memory.sock" 2 1 "$mdb/write.sqlite3" "$bytes"
  memory_pids=$WRITE_PIDS
fi
gw_pids=$(pgrep -P "$GATEWAY_PID" | tr '\n' ' ')
for p in "$wport" "$gport" "$rport"; do
  [ "$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -X POST -d '{}' "http://127.0.0.1:$p/")" = "201 $bytes" ] \
    || die "the write floor on port $p does not answer 201 with $bytes bytes"
done

for r in $(seq "$rounds"); do
  ROUND=$round measure_cpu "floor-$r" "http://127.0.0.1:$hport/" report.lua "$hello_pids"
  ROUND=$round measure_cpu "write-$r" "http://127.0.0.1:$wport/" create.lua "$write_pids"
  ROUND=$round measure_cpu "grouped-$r" "http://127.0.0.1:$gport/" create.lua "$grouped_pids"
  [ -z "$mdb" ] || ROUND=$round measure_cpu "memory-$r" "http://127.0.0.1:$mport/" create.lua "$memory_pids"
  ROUND=$round measure_cpu "create-$r" "$gw/v1/weather/session" create.lua "$gw_pids"
  ROUND=$round measure_cpu "write_refresh-$r" "http://127.0.0.1:$rport/" create.lua "$refresh_pids"
  THREADS=2 CONNECTIONS=32 DURATION=$round seed_pairs "r$r" "$gw" \
    "$(awk -v c="${RPS[create-$r]}" -v d="$(duration_seconds "$round")" 'BEGIN { printf "%d", c * d * 3 + 2000 }')"
  PAIRS_FILE=$OUT/pairs-r$r.txt ROUND=$round measure_cpu "refresh-$r" "$gw/v1/weather/session/refresh" refresh.lua "$gw_pids"
  [ -z "${NOTE[refresh-$r]:-}" ] || log "warning: ${NOTE[refresh-$r]}"
done
rows_written=$(sqlite3 "$OUT/wdb/write.sqlite3" "SELECT count(*) FROM anonymous_weather_sessions")
rows_grouped=$(sqlite3 "$OUT/wdb/grouped.sqlite3" "SELECT count(*) FROM anonymous_weather_sessions")
wal_sizes=""
for db in write grouped refresh; do
  wal_sizes+="${wal_sizes:+, }$db $(awk -v b="$(stat -c %s "$OUT/wdb/$db.sqlite3-wal" 2>/dev/null || echo 0)" 'BEGIN { printf "%.1f", b / 1048576 }') MiB"
done
rows_refreshed=$(sqlite3 "$OUT/wdb/refresh.sqlite3" "SELECT count(*) FROM weather_session_tokens WHERE token_type = 'refresh' AND revoked_at IS NOT NULL")

{
  results_header "bench/floor-write.sh${label:+ ($label)}" "ROUNDS=$rounds ROUND=$round bench/floor-write.sh $args"
  echo "wrk -t2 -c32 through nginx (1 worker). Floor: c-hello, 2 processes, GET. Write floor: bench/floor-write.c, 2 processes of one thread (POST, reads the body, inserts a session and two token rows in one transaction, WAL, synchronous=NORMAL, answers $bytes bytes, as the gateway's creation does; $rows_written sessions written in all). Grouped: the same program, $group_processes process(es) of $group_threads threads sharing one connection with group commit ($rows_grouped sessions). Creation: the gateway, 2 workers, the same bodies. CPU per request from /proc/PID/stat (utime + stime, threads included) over each measurement."
  echo
  echo "| round | floor req/s | write floor req/s | grouped req/s | creation req/s | write floor / floor | grouped / floor | creation / floor | creation / write floor | p99 ms: floor, write, grouped, creation | errors: floor, write, grouped, creation | µs/req responders: floor, write, grouped, creation | µs/req nginx: floor, write, grouped, creation |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"
  for r in $(seq "$rounds"); do
    echo "| $r | ${RPS[floor-$r]} | ${RPS[write-$r]} | ${RPS[grouped-$r]} | ${RPS[create-$r]} | $(ratio "${RPS[write-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[grouped-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[create-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[create-$r]}" "${RPS[write-$r]}") | ${P99[floor-$r]}, ${P99[write-$r]}, ${P99[grouped-$r]}, ${P99[create-$r]} | ${ERRS[floor-$r]}, ${ERRS[write-$r]}, ${ERRS[grouped-$r]}, ${ERRS[create-$r]} | ${US[floor-$r]}, ${US[write-$r]}, ${US[grouped-$r]}, ${US[create-$r]} | ${NGX[floor-$r]}, ${NGX[write-$r]}, ${NGX[grouped-$r]}, ${NGX[create-$r]} |"
  done
  echo
  if [ -n "$mdb" ]; then
    echo
    echo "The write floor on a RAM file system ($memory_dir, 2 processes, the same program; no disk, no durability, not a deployment):"
    echo
    echo "| round | floor req/s | write floor req/s | write floor in RAM req/s | in RAM / floor | in RAM / write floor | p99 ms in RAM | µs/req responders in RAM |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for r in $(seq "$rounds"); do
      echo "| $r | ${RPS[floor-$r]} | ${RPS[write-$r]} | ${RPS[memory-$r]} | $(ratio "${RPS[memory-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[memory-$r]}" "${RPS[write-$r]}") | ${P99[memory-$r]} | ${US[memory-$r]} |"
    done
  fi
  echo
  echo "The write floors checkpoint inline (SQLite's autocheckpoint, PASSIVE, every 4,000 pages; no RESTART); their WAL files at the end: $wal_sizes. The gateway checkpoints on a thread of its own and starts the WAL over past 64 MiB."
  echo
  echo "Refresh: the write floor with FLOOR_WRITE_KIND=refresh, 2 processes (finds its last refresh token by hash, then in one transaction marks it spent by rowid and inserts the next pair; $rows_refreshed tokens spent in all), and the gateway's refresh, each request spending a fresh token seeded before the round."
  echo
  echo "| round | floor req/s | refresh write floor req/s | refresh req/s | refresh write floor / floor | refresh / floor | refresh / refresh write floor | p99 ms: write floor, refresh | errors: write floor, refresh | µs/req responders: write floor, refresh | µs/req nginx: write floor, refresh |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|"
  for r in $(seq "$rounds"); do
    echo "| $r | ${RPS[floor-$r]} | ${RPS[write_refresh-$r]} | ${RPS[refresh-$r]} | $(ratio "${RPS[write_refresh-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[refresh-$r]}" "${RPS[floor-$r]}") | $(ratio "${RPS[refresh-$r]}" "${RPS[write_refresh-$r]}") | ${P99[write_refresh-$r]}, ${P99[refresh-$r]} | ${ERRS[write_refresh-$r]}, ${ERRS[refresh-$r]} | ${US[write_refresh-$r]}, ${US[refresh-$r]} | ${NGX[write_refresh-$r]}, ${NGX[refresh-$r]} |"
  done
} >>"$RESULTS"
log "appended to $RESULTS"
