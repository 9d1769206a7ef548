#!/usr/bin/env bash
# `make run`: the gateway on its embedded defaults behind a loopback nginx on 127.0.0.1:8080,
# with SQLite under ./var. Ctrl-C stops everything it started.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
port=${PORT:-8080}
var="$root/var"
mkdir -p "$var/data" "$var/run" "$var/nginx"
chmod 700 "$var/data"
bin=$(swift build -c release --show-bin-path)
export WEATHER_DB_PATH=${WEATHER_DB_PATH:-$var/data/weather.sqlite3}
conf=$(scripts/nginx-conf.sh "$port" "$var/run/weather.sock" "$var/nginx")

"$bin/weather-fcgi" --listen "$var/run/weather.sock" --socket-mode 0666 --workers "${WORKERS:-2}" &
app=$!
for _ in $(seq 50); do [ -S "$var/run/weather.sock" ] && break; sleep 0.1; done
nginx -c "$conf" &
web=$!
stop() { kill "$web" "$app" 2>/dev/null || true; wait 2>/dev/null || true; echo "stopped"; }
trap stop INT TERM EXIT

cat <<TXT

closet-weather gateway on http://127.0.0.1:$port  (database: $WEATHER_DB_PATH)
Try:
  curl -s http://127.0.0.1:$port/v1/health
  curl -s -X POST http://127.0.0.1:$port/v1/weather/session -H 'Content-Type: application/json' \\
       -d '{"platform":"ios","appVersion":"1.0","installationId":"'\$(cat /proc/sys/kernel/random/uuid)'"}'
  curl -s 'http://127.0.0.1:$port/v1/weather?lat=31.2304&lon=121.4737' -H 'X-Weather-Session-Token: wta_...'
Provider keys: set CAIYUN_API_TOKEN and/or VISUAL_CROSSING_API_KEY before 'make run' (else 503 provider_not_configured).
Ctrl-C stops.
TXT
wait "$app"
