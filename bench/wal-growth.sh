#!/usr/bin/env bash
# WAL size after a burst of writes: 2 workers, 30,000 sessions created (the refresh seed), then 6 s
# of refreshes; prints the database and WAL sizes, and how long the gateway takes to stop (with a
# strace -c of the stop). Shows whether the WAL restarts under steady load (docs/decisions.md).
# usage: bench/wal-growth.sh            (GATEWAY_BIN to measure another build)
source "$(dirname "$0")/lib.sh"
bench_init walgrowth
build_gateway
start_fake_provider
sock=$OUT/gw.sock port=$(free_port)
conf=$("$BENCH_ROOT/scripts/nginx-conf.sh" "$port" "$sock" "$OUT/nginx")
start_gateway "$sock" 2 "$OUT/db/w.sqlite3" off
start_nginx "$conf"
wait_http "http://127.0.0.1:$port/v1/health"
export THREADS=2 CONNECTIONS=32 DURATION=5s
seed_pairs x "http://127.0.0.1:$port" 30000 >/dev/null 2>&1
PAIRS_FILE=$OUT/pairs-x.txt BENCH_THREADS=2 wrk -t2 -c32 -d6s -s "$BENCH_LUA/refresh.lua" "http://127.0.0.1:$port/v1/weather/session/refresh" | grep BENCH | cut -c1-60
ls -la $OUT/db/ | awk '{print $5, $9}' | grep -v "^ *$"
w=$(pgrep -P $GATEWAY_PID | head -1)
timeout 20 strace -f -c -p $GATEWAY_PID -p $(pgrep -P $GATEWAY_PID | tr '\n' ',' | sed 's/,$//; s/,/ -p /g') -o $OUT/strace.txt &
sleep 0.5
t0=$(date +%s.%N); stop_pid $GATEWAY_PID; t1=$(date +%s.%N)
echo "stop took $(awk -v a=$t0 -v b=$t1 'BEGIN{print b-a}') s"
sleep 1; head -14 $OUT/strace.txt
ls -la $OUT/db/ | awk '{print $5, $9}'
