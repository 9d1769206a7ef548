#!/usr/bin/env bash
# The FastAPI peer (../shared/bench/peers/fastapi/app.py) under uvicorn on a unix socket, with
# its weather_cache row for the benchmark point seeded, for `bench/run.sh --peer ...`.
#
# usage: bench/peer-fastapi.sh [--socket SOCK] [--workers N] [--port PORT]
#   --socket SOCK  uvicorn's unix socket (default bench/out/peer-fastapi/peer.sock)
#   --workers N    uvicorn worker processes (default $WORKERS or 2, as the gateway's default)
#   --port PORT    also start a private nginx (1 worker) on 127.0.0.1:PORT that proxy_passes to
#                  the socket, so it can be measured with `bench/run.sh --peer http://127.0.0.1:PORT`
# Runs in the foreground until SIGINT/SIGTERM and then stops what it started.
# `bench/run.sh --peer fastapi` starts it itself (socket only) behind run.sh's own nginx.
#
# Environment: WEATHER_DB_PATH (default beside the socket, recreated each start),
# CLOSET_WEATHER_PROXY_TOKEN (default the benchmarks' legacy token), PEER_APP (app.py's folder),
# PEER_VENV (virtualenv with fastapi uvicorn uvloop httptools; created with pip when missing).
source "$(dirname "$0")/lib.sh"

sock="" port="" workers=${WORKERS:-2}
while [ $# -gt 0 ]; do
  case $1 in
    --socket) sock=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument $1" ;;
  esac
done

dir=${PEER_DIR:-$BENCH_DIR/out/peer-fastapi}
mkdir -p "$dir"
sock=${sock:-$dir/peer.sock}
app=${PEER_APP:-$SHARED/bench/peers/fastapi}
venv=${PEER_VENV:-$BENCH_DIR/out/peer-venv}
db=${WEATHER_DB_PATH:-$dir/peer.sqlite3}
[ -f "$app/app.py" ] || die "no app.py in $app (set PEER_APP)"

if [ ! -x "$venv/bin/uvicorn" ]; then
  log "creating $venv (pip install fastapi uvicorn uvloop httptools)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q fastapi uvicorn uvloop httptools
fi

# The same schema app.py creates, and one fresh cached report for the benchmark point: app.py
# keys it `now:{lat},{lon}` on the 0.05 grid, 31.2304,121.4737 -> now:31.25,121.45.
rm -f "$db" "$db-wal" "$db-shm"
sqlite3 "$db" >/dev/null <<'SQL'
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS anonymous_weather_sessions (
  id TEXT PRIMARY KEY, installation_id_hash TEXT NOT NULL, platform TEXT NOT NULL, app_version TEXT,
  status TEXT NOT NULL, created_at TEXT NOT NULL, last_seen_at TEXT NOT NULL, revoked_at TEXT);
CREATE TABLE IF NOT EXISTS weather_session_tokens (
  id TEXT PRIMARY KEY, session_id TEXT NOT NULL REFERENCES anonymous_weather_sessions(id),
  token_hash TEXT NOT NULL UNIQUE, token_type TEXT NOT NULL, expires_at TEXT NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT);
CREATE TABLE IF NOT EXISTS weather_cache (
  cache_key TEXT PRIMARY KEY, body TEXT NOT NULL, fetched_at TEXT NOT NULL, expires_at TEXT NOT NULL);
INSERT OR REPLACE INTO weather_cache VALUES ('now:31.25,121.45',
  '{"provider":"caiyun","location":{"lat":31.25,"lon":121.45},"timezone":"Asia/Shanghai","current":{"observedAt":"2026-11-30T02:00:00Z","temperatureC":12.3,"apparentTemperatureC":10.1,"humidity":0.62,"windSpeedKph":9.4,"precipitationMmPerHour":0.0,"condition":"cloudy"},"daily":[{"date":"2026-11-30","temperatureMinC":8.0,"temperatureMaxC":14.5,"condition":"partly_cloudy","precipitationProbability":0.1},{"date":"2026-12-01","temperatureMinC":7.0,"temperatureMaxC":13.0,"condition":"cloudy","precipitationProbability":0.2},{"date":"2026-12-02","temperatureMinC":6.5,"temperatureMaxC":12.0,"condition":"rain","precipitationProbability":0.7},{"date":"2026-12-03","temperatureMinC":5.0,"temperatureMaxC":11.5,"condition":"partly_cloudy","precipitationProbability":0.1},{"date":"2026-12-04","temperatureMinC":5.5,"temperatureMaxC":12.5,"condition":"clear","precipitationProbability":0.0},{"date":"2026-12-05","temperatureMinC":6.0,"temperatureMaxC":13.5,"condition":"clear","precipitationProbability":0.0},{"date":"2026-12-06","temperatureMinC":7.5,"temperatureMaxC":14.0,"condition":"cloudy","precipitationProbability":0.3}],"fetchedAt":"2026-11-30T02:03:11Z"}',
  strftime('%Y-%m-%dT%H:%M:%SZ', 'now'), '2099-01-01T00:00:00Z');
SQL

trap bench_cleanup EXIT
trap 'exit 0' INT TERM
rm -f "$sock"
(cd "$app" && exec env WEATHER_DB_PATH="$db" CLOSET_WEATHER_PROXY_TOKEN="${CLOSET_WEATHER_PROXY_TOKEN:-$BENCH_LEGACY_TOKEN}" \
  "$venv/bin/uvicorn" app:app --uds "$sock" --workers "$workers" --no-access-log --log-level warning) &
uvicorn_pid=$!
track "$uvicorn_pid"
wait_socket "$sock" "$uvicorn_pid"
chmod 0666 "$sock" 2>/dev/null || true
# The master binds the socket before its workers accept: wait for a real HTTP answer.
for _ in $(seq 300); do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 --unix-socket "$sock" http://peer/v1/weather || true)
  [ "$code" != 000 ] && break
  sleep 0.1
done
[ "$code" != 000 ] || die "uvicorn does not answer on $sock"

if [ -n "$port" ]; then
  OUT=$dir
  cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/nginx-error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/client_body;
  proxy_temp_path $dir/proxy;
  fastcgi_temp_path $dir/fastcgi;
  uwsgi_temp_path $dir/uwsgi;
  scgi_temp_path $dir/scgi;
  server { listen 127.0.0.1:$port; location / { proxy_pass http://unix:$sock:; } }
}
CONF
  start_nginx "$dir/nginx.conf"
  wait_http "http://127.0.0.1:$port/v1/weather"
  log "FastAPI peer on http://127.0.0.1:$port (socket $sock, database $db); Ctrl-C stops"
else
  log "FastAPI peer on unix:$sock (database $db)"
fi
echo "ready" >"$dir/ready"
wait "$uvicorn_pid"
