#!/usr/bin/env bash
# `make run`: the gateway on its embedded defaults behind a loopback nginx on 127.0.0.1:8080,
# with SQLite under ./var. Ctrl-C stops everything it started. PORT (8080) and WORKERS (2) change
# the port and the number of workers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
port=${PORT:-8080}
var="$root/var"
mkdir -p "$var/data" "$var/run" "$var/nginx"
chmod 700 "$var/data"
bin=$("${SWIFT:-swift}" build -c release --show-bin-path)
export WEATHER_DB_PATH=${WEATHER_DB_PATH:-$var/data/weather.sqlite3}
conf=$(scripts/nginx-conf.sh "$port" "$var/run/weather.sock" "$var/nginx")

"$bin/weather-fcgi" --listen "$var/run/weather.sock" --socket-mode 0666 --workers "${WORKERS:-2}" &
app=$!
web=""
stop() {
  trap - INT TERM EXIT
  kill $web "$app" 2>/dev/null || true
  wait 2>/dev/null || true
  echo "stopped"
}
trap stop INT TERM EXIT
for _ in $(seq 50); do [ -S "$var/run/weather.sock" ] && break; kill -0 "$app" 2>/dev/null || break; sleep 0.1; done
kill -0 "$app" 2>/dev/null || { echo "run: weather-fcgi did not start (its message is above)" >&2; exit 1; }
"$(command -v nginx || echo /usr/sbin/nginx)" -c "$conf" &  # /usr/sbin is not on every user's PATH
web=$!

# The gateway's own health answer through this nginx, or a clear failure: nginx that cannot bind
# the port (another server on it) exits, and a curl to the port would reach that other server.
health() {
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf 'GET /v1/health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  local answer
  answer=$(timeout 2 cat <&3) || true
  exec 3<&-
  [[ "$answer" == *'"status":"ok"'* && "$answer" == *[Xx]-[Rr]equest-[Ii]d* ]]
}
up=""
for _ in $(seq 50); do
  kill -0 "$web" 2>/dev/null || break
  if health 2>/dev/null; then up=1; break; fi
  sleep 0.1
done
[ -n "$up" ] || { echo "run: nothing of ours answers on 127.0.0.1:$port (is another server on it? PORT=... picks another port)" >&2; exit 1; }

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
