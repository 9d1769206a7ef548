#!/bin/sh
# Starts the closet weather FastCGI workers on the unix socket nginx talks to
# (deploy/nginx/closet-weather.conf), for hosts without systemd. Run as root.
#
#   WORKERS=4 ./spawn-fcgi.sh          # start (default 4 workers)
#   ./spawn-fcgi.sh stop               # stop the workers started by the last run, and wait
#   ./spawn-fcgi.sh restart            # stop, wait until they are gone, start again
#
# Two ways to run the workers; pick ONE:
#
# 1. Recommended, and this script's default (USE_SUPERVISOR=1): the program's own supervisor.
#    It binds the socket, forks N workers and replaces any worker that crashes or exits after
#    WEATHER_MAX_REQUESTS requests; their log lines go to LOGFILE
#    (/var/log/closet-weather.log). By hand:
#      sudo -u closet-weather env WEATHER_CONFIG=/etc/closet-weather/weather.conf \
#        /usr/local/bin/weather-fcgi --listen /run/closet-weather/weather.sock --workers 4
#    (Under systemd, deploy/systemd/closet-weather.{socket,service} does exactly this.)
#    Give www-data access to the socket: the directory /run/closet-weather is
#    closet-weather:www-data 2750 (setgid, so the socket gets group www-data) and the socket
#    is created 0660.
#
# 2. spawn-fcgi (USE_SUPERVISOR=0): spawn-fcgi binds the socket, forks N copies of weather-fcgi
#    sharing it on fd 0, and exits. Nobody restarts a worker that dies, so pair it with a process
#    monitor, and the workers' log lines are lost (spawn-fcgi leaves them no standard error).
#
# Each worker serves one request at a time; N workers answer N requests at once. Slow provider calls
# (up to WEATHER_PROVIDER_TIMEOUT seconds each) hold a worker, so size N for your traffic;
# 4 is plenty for a few thousand users because answers are cached per 5 km cell.
set -eu

SOCKET=${SOCKET:-/run/closet-weather/weather.sock}
RUNDIR=$(dirname "$SOCKET")
PIDFILE=${PIDFILE:-$RUNDIR/weather-fcgi.pid}
BINARY=${BINARY:-/usr/local/bin/weather-fcgi}
SERVICE_USER=${SERVICE_USER:-closet-weather}
# nginx's group: it must be able to connect to the socket.
WEB_GROUP=${WEB_GROUP:-www-data}
USE_SUPERVISOR=${USE_SUPERVISOR:-1}
# The worker reads its settings from this file (environment variables win over it).
export WEATHER_CONFIG="${WEATHER_CONFIG:-/etc/closet-weather/weather.conf}"
# A crashing worker must not print a stack trace (with source paths) into the log: API.md allows
# none. Set SWIFT_BACKTRACE=enable=yes yourself while you debug a crash.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"

stop() {
    # Only the processes this script recorded; SIGTERM lets each finish its request in hand.
    # Waits until they are gone (at most 15 s: the supervisor kills workers still busy after
    # 12 s), so a start right after finds the socket free; it used to return at once, and a
    # start within the old supervisor's last moments exited 71 ("another process is serving
    # that socket"), leaving nothing running.
    [ -f "$PIDFILE" ] || { echo "no $PIDFILE: nothing to stop" >&2; return 1; }
    pids=$(cat "$PIDFILE")
    kill -TERM $pids 2>/dev/null || true
    i=0
    while [ $i -lt 150 ]; do
        alive=""
        for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
        [ -z "$alive" ] && break
        sleep 0.1
        i=$((i + 1))
    done
    [ -z "$alive" ] || { echo "still running after 15 s: $pids" >&2; return 1; }
    rm -f "$PIDFILE"
}

case "${1:-start}" in
    stop) stop; exit $? ;;
    restart) [ -f "$PIDFILE" ] && stop ;;
    start) ;;
    *) echo "usage: $0 [start|stop|restart]" >&2; exit 64 ;;
esac

SERVICE_GROUP=$(id -gn "$SERVICE_USER")

# /run is a tmpfs: recreate the socket directory at every boot. Group www-data with mode 2750
# lets nginx reach the socket and keeps everyone else out; the setgid bit makes a socket that
# weather-fcgi creates itself (option 1) belong to group www-data too.
# Only a folder of the service's own: with SOCKET=/run/x.sock this would make /run itself
# closet-weather:www-data 2750 and lock every other daemon out of it.
if [ -e "$RUNDIR" ] && [ "$(stat -c %U "$RUNDIR")" != "$SERVICE_USER" ]; then
  echo "spawn-fcgi.sh: the folder of SOCKET exists and is not $SERVICE_USER's; give the socket a folder of its own (default /run/closet-weather)" >&2
  exit 1
fi
install -d -m 2750 -o "$SERVICE_USER" -g "$WEB_GROUP" "$RUNDIR"

if [ "$USE_SUPERVISOR" = "1" ]; then
    # Option 1: the built-in supervisor, in the background, as the service user.
    # (setpriv is in util-linux; `runuser -u` works too.)
    setpriv --reuid="$SERVICE_USER" --regid="$SERVICE_GROUP" --init-groups \
        "$BINARY" --listen "$SOCKET" --socket-mode 0660 --workers "${WORKERS:-4}" >>"${LOGFILE:-/var/log/closet-weather.log}" 2>&1 &
    echo $! >"$PIDFILE"
    exit 0
fi

# Option 2: spawn-fcgi. -u/-g: the workers run as closet-weather (they own the database folder);
# -U/-G/-M: the socket is closet-weather:www-data 0660 so nginx can connect.
# -P records every forked worker's pid for `stop`.
exec spawn-fcgi -s "$SOCKET" -M 0660 -U "$SERVICE_USER" -G "$WEB_GROUP" \
    -u "$SERVICE_USER" -g "$SERVICE_GROUP" -F "${WORKERS:-4}" -P "$PIDFILE" \
    -- "$BINARY"
