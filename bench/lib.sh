# Shared helpers of the benchmark scripts (sourced, not run). bash only.
#
# Everything a script starts is recorded with `track PID` and stopped, by pid, when the script
# exits (trap EXIT), whatever way it exits. Work files go to bench/out/NAME-TIMESTAMP/ (ignored
# by git); results are appended to bench/RESULTS.md.

set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DIR="$BENCH_ROOT/bench"
BENCH_LUA="$BENCH_DIR/lua"
RESULTS=${RESULTS:-$BENCH_DIR/RESULTS.md}
SHARED=${SHARED:-$BENCH_ROOT/../shared}
export BENCH_LUA
# The shipped nginx site writes an access log; the floor and ceiling servers beside it do not, and
# results before session 9 were taken without one. NGINX_ACCESS_LOG=PATH measures with it.
export NGINX_ACCESS_LOG=${NGINX_ACCESS_LOG:-off}

# The same fixed secrets every run: the numbers must not depend on a generated key.
BENCH_LEGACY_TOKEN=${BENCH_LEGACY_TOKEN:-bench-legacy-token-0123456789abcdef}
BENCH_HASH_KEY=${BENCH_HASH_KEY:-bench-hash-key-0123456789abcdef0123456789abcdef}
# The point every cached-weather request asks for (snaps to 31.25,121.45 on the 0.05 grid).
BENCH_LAT=31.2304
BENCH_LON=121.4737

BENCH_PIDS=() BENCH_DIRS=()  # stopped and removed at exit

# The command line of a script that takes only --label TEXT and --help: sets `label`, and `args`
# (the arguments quoted again, for the results file's command line).
bench_args() {
  label="" args=$(printf "%q " "$@"); args=${args% }
  while [ $# -gt 0 ]; do
    case $1 in
      --label) label=$2; shift 2 ;;
      -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
      *) die "unknown argument $1" ;;
    esac
  done
}

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

track() { BENCH_PIDS+=("$1"); }

# Stops one process by pid: TERM, up to 5 s grace, then KILL.
stop_pid() {
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

bench_cleanup() {
  local rc=$? i
  trap - EXIT INT TERM
  for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${BENCH_PIDS[$i]}"; done
  for i in "${BENCH_DIRS[@]}"; do rm -rf "$i"; done
  # The seeded (session, refresh token) pairs are plaintext tokens, if only of a bench database:
  # the work folder keeps logs and databases for a look afterwards, not these.
  [ -z "${OUT:-}" ] || rm -f "$OUT"/pairs-*
  exit $rc
}

# bench_init NAME: output folder, cleanup trap, tool check.
bench_init() {
  local name=$1
  BENCH_NAME=$name
  BENCH_STAMP=$(date -u +%Y%m%dT%H%M%SZ)
  LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
  OUT=${BENCH_OUT:-$BENCH_DIR/out/$name-$BENCH_STAMP}
  mkdir -p "$OUT"
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
  local t missing=()
  for t in wrk nginx spawn-fcgi cc sqlite3 curl python3; do command -v "$t" >/dev/null || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] || die "missing tools: ${missing[*]} (WITH_BENCH=1 scripts/install-deps.sh)"
  log "$name: work files in $OUT"
}

# Seconds in a wrk duration (10, 10s, 2m, 1h).
duration_seconds() {
  local d=$1
  case $d in
    *h) echo $(( ${d%h} * 3600 )) ;;
    *m) echo $(( ${d%m} * 60 )) ;;
    *s) echo "${d%s}" ;;
    *) echo "$d" ;;
  esac
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The release weather-fcgi, built in its own scratch path (GATEWAY_BIN=path skips the build).
build_gateway() {
  if [ -n "${GATEWAY_BIN:-}" ]; then
    GATEWAY_BIN=$GATEWAY_BIN
  else
    local scratch=${BENCH_SCRATCH:-$BENCH_ROOT/.build-bench}
    log "building weather-fcgi (release, $scratch)"
    (cd "$BENCH_ROOT" && swift build -c release --scratch-path "$scratch" --product weather-fcgi) >"$OUT/build.log" 2>&1 \
      || { tail -30 "$OUT/build.log" >&2; die "build failed"; }
    GATEWAY_BIN="$(cd "$BENCH_ROOT" && swift build -c release --scratch-path "$scratch" --show-bin-path)/weather-fcgi"
  fi
  [ -x "$GATEWAY_BIN" ] || die "no weather-fcgi at $GATEWAY_BIN"
}

wait_socket() {
  local sock=$1 pid=${2:-} i
  for i in $(seq 200); do
    [ -S "$sock" ] && return 0
    [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && die "process $pid died before $sock appeared"
    sleep 0.05
  done
  die "socket $sock did not appear"
}

# Until URL answers with something other than nothing or nginx's 502/503 (upstream not ready).
wait_http() {
  local url=$1 i code
  for i in $(seq 200); do
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)
    case $code in 000|502|503) ;; *) return 0 ;; esac
    sleep 0.05
  done
  die "$url did not answer"
}

# The loopback fake of both providers; sets FAKE_PORT and FAKE_URL.
start_fake_provider() {
  rm -f "$OUT/fake.port"
  python3 "$BENCH_ROOT/Tests/Support/fake_provider.py" --port 0 --port-file "$OUT/fake.port" >"$OUT/fake.log" 2>&1 &
  FAKE_PID=$!
  track "$FAKE_PID"
  local i
  for i in $(seq 100); do [ -s "$OUT/fake.port" ] && break; sleep 0.05; done
  [ -s "$OUT/fake.port" ] || die "fake provider did not start"
  FAKE_PORT=$(cat "$OUT/fake.port")
  FAKE_URL="http://127.0.0.1:$FAKE_PORT"
}

# Provider calls the fake has answered so far.
fake_calls() { curl -s "$FAKE_URL/_calls" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }

# Gateway environment: the fake providers, a long cache TTL, fixed keys, and limits as asked:
# LIMITS=off sets every limit to 0; LIMITS=high sets them all to 10,000,000 (the largest value
# the configuration accepts) so the limiter and its SQLite writes run but never refuse;
# LIMITS=default leaves the shipped defaults.
gateway_env() {
  local db=$1 limits=${2:-off} v
  GW_ENV=(
    "WEATHER_DB_PATH=$db"
    "WEATHER_HASH_KEY=$BENCH_HASH_KEY"
    "CLOSET_WEATHER_PROXY_TOKEN=$BENCH_LEGACY_TOKEN"
    "CAIYUN_API_TOKEN=bench-fake-key"
    "CAIYUN_BASE_URL=$FAKE_URL"
    "VISUAL_CROSSING_API_KEY=bench-fake-key"
    "VISUAL_CROSSING_BASE_URL=$FAKE_URL"
    "WEATHER_CACHE_TTL=${WEATHER_CACHE_TTL:-86400}"
    "WEATHER_CACHE_STALE_TTL=${WEATHER_CACHE_STALE_TTL:-86400}"
  )
  # SPREAD_ADDRESSES=1: believe X-Forwarded-For from nginx on loopback (create.lua's BENCH_SPREAD).
  [ "${SPREAD_ADDRESSES:-0}" != 1 ] || GW_ENV+=("WEATHER_TRUSTED_PROXIES=127.0.0.1/32")
  case $limits in
    off) v=0 ;;
    high) v=10000000 ;;
    default) return 0 ;;
    *) die "LIMITS must be off, high or default" ;;
  esac
  local n
  for n in WEATHER_SESSION_CREATE_PER_IP_PER_HOUR WEATHER_REFRESH_PER_SESSION_PER_HOUR \
           WEATHER_REQUESTS_PER_SESSION_PER_HOUR WEATHER_REQUESTS_PER_IP_PER_HOUR \
           WEATHER_GRID_CELLS_PER_SESSION_PER_DAY WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR; do
    GW_ENV+=("$n=$v")
  done
}

# start_gateway SOCK WORKERS DB LIMITS [LOGNAME]: sets GATEWAY_PID (the supervisor, or the only
# worker when WORKERS=1). WEATHER_CONFIG points at an empty file so no host config leaks in.
start_gateway() {
  local sock=$1 workers=$2 db=$3 limits=$4 logname=${5:-gateway}
  mkdir -p "$(dirname "$db")"
  : >"$OUT/empty.conf"
  gateway_env "$db" "$limits"
  rm -f "$sock"
  env "${GW_ENV[@]}" WEATHER_CONFIG="$OUT/empty.conf" \
    "$GATEWAY_BIN" --listen "$sock" --socket-mode 0666 --workers "$workers" 2>>"$OUT/$logname.log" &
  GATEWAY_PID=$!
  track "$GATEWAY_PID"
  wait_socket "$sock" "$GATEWAY_PID"
  sleep 0.2
  kill -0 "$GATEWAY_PID" 2>/dev/null || { tail "$OUT/$logname.log" >&2; die "gateway exited"; }
}

stop_gateway() { stop_pid "$GATEWAY_PID"; rm -f "$1"; }

# The do-nothing libfcgi responder (the floor); sets HELLO_PIDS.
start_hello() {
  local sock=$1 n=$2 src=${HELLO_SRC:-$SHARED/bench/peers/c-hello/hello.c}
  [ -f "$src" ] || die "no $src (set HELLO_SRC)"
  cc -O2 -o "$OUT/hello" "$src" -lfcgi || die "cannot build hello.c (libfcgi-dev missing?)"
  rm -f "$sock"
  spawn-fcgi -s "$sock" -M 0666 -F "$n" -P "$OUT/hello.pid" -- "$OUT/hello" >"$OUT/hello.log" 2>&1
  local p
  for p in $(cat "$OUT/hello.pid"); do track "$p"; done
  wait_socket "$sock"
}

# seed_big_db DB N: N sessions in the migrated database DB, each with 3 token rows (1 access, 2
# refresh of which one revoked) and one rate-limit bucket, inserted with sqlite3 in one
# transaction (recursive CTE, randomblob hex hashes); sets SEED_SECONDS.
seed_big_db() {
  local db=$1 n=$2 t0 created access_exp refresh_exp now_ms
  log "inserting $n sessions, $((n * 3)) tokens, $n rate-limit buckets"
  t0=$(date +%s.%N)
  created=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  access_exp=$(date -u -d '+12 hours' +%Y-%m-%dT%H:%M:%SZ)
  refresh_exp=$(date -u -d '+30 days' +%Y-%m-%dT%H:%M:%SZ)
  now_ms=$(( $(date +%s) * 1000 ))
  sqlite3 "$db" >"$OUT/insert.log" 2>&1 <<SQL
PRAGMA cache_size = -262144;
BEGIN;
CREATE TEMP TABLE n AS WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < $n) SELECT i FROM c;
INSERT INTO anonymous_weather_sessions(id, installation_id_hash, platform, app_version, status, created_at, last_seen_at, revoked_at)
  SELECT printf('aws_scale%09d', i), lower(hex(randomblob(32))), CASE i % 4 WHEN 0 THEN 'android' ELSE 'ios' END,
         '1.0', 'active', '$created', '$created', NULL FROM n;
INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at, created_at, revoked_at)
  SELECT printf('wst_scale_a%09d', i), printf('aws_scale%09d', i), lower(hex(randomblob(32))), 'access', '$access_exp', '$created', NULL FROM n;
INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at, created_at, revoked_at)
  SELECT printf('wst_scale_r%09d', i), printf('aws_scale%09d', i), lower(hex(randomblob(32))), 'refresh', '$refresh_exp', '$created', NULL FROM n;
INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at, created_at, revoked_at)
  SELECT printf('wst_scale_o%09d', i), printf('aws_scale%09d', i), lower(hex(randomblob(32))), 'refresh', '$refresh_exp', '$created', '$created' FROM n;
INSERT INTO weather_rate_limits(bucket_key, tat_ms)
  SELECT printf('weather_session:aws_scale%09d', i), $now_ms FROM n;
COMMIT;
PRAGMA wal_checkpoint(TRUNCATE);
SQL
  [ -s "$OUT/insert.log" ] && grep -qi error "$OUT/insert.log" && { cat "$OUT/insert.log" >&2; die "insert failed"; }
  SEED_SECONDS=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}

# seed_doomed_sessions DB N PERCENT: N sessions with 3 token rows each (SHA-256 hex hashes), the
# first PERCENT % of them revoked on 2026-02-01 (sessions and tokens past every retention rule:
# what `weatherctl prune` deletes), the others active with live tokens (bench/cleanup.sh,
# bench/prune-load.sh).
seed_doomed_sessions() {
python3 - "$1" "$2" "$3" <<'EOF'
import sqlite3, hashlib, sys
db = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2]); doomed = int(sys.argv[3])
def h(s): return hashlib.sha256(s.encode()).hexdigest()
def gone(i): return i * 100 // n < doomed
def sessions():
    for i in range(n):
        r = gone(i)
        yield ('aws_%032x' % i, h('i%d' % i), 'ios', '1.0', 'revoked' if r else 'active', '2026-01-20T00:00:00Z',
               '2026-01-25T00:00:00Z' if r else '2099-01-01T00:00:00Z', '2026-02-01T00:00:00Z' if r else None)
def tokens():
    for i in range(n):
        r = gone(i)
        for k, t in enumerate(['access', 'refresh', 'refresh']):
            yield ('wst_%d_%d' % (i, k), 'aws_%032x' % i, h('t%d_%d' % (i, k)), t,
                   '2026-02-01T12:00:00Z' if r else '2099-01-01T00:00:00Z', '2026-01-20T00:00:00Z', None)
db.executemany('INSERT INTO anonymous_weather_sessions VALUES (?,?,?,?,?,?,?,?)', sessions())
db.executemany('INSERT INTO weather_session_tokens VALUES (?,?,?,?,?,?,?)', tokens())
db.commit()
db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
EOF
}

# The write floor (bench/floor-write.c), built once into $OUT.
build_write_floor() {
  [ -x "$OUT/floor-write" ] && return 0
  cc -O2 -pthread -o "$OUT/floor-write" "$BENCH_DIR/floor-write.c" -lfcgi -lsqlite3 || die "cannot build floor-write.c"
}

# start_write_floor SOCK PROCESSES THREADS DB BYTES: the write floor on DB (already migrated),
# answering BYTES bytes; sets WRITE_PIDS.
start_write_floor() {
  local sock=$1 p
  build_write_floor
  rm -f "$sock"
  FLOOR_WRITE_DB=$4 FLOOR_WRITE_BYTES=$5 FLOOR_WRITE_THREADS=$3 \
    spawn-fcgi -s "$sock" -M 0666 -F "$2" -P "$sock.pid" -- "$OUT/floor-write" >>"$OUT/floor-write.log" 2>&1
  WRITE_PIDS=$(cat "$sock.pid")
  for p in $WRITE_PIDS; do track "$p"; done
  wait_socket "$sock"
}

# fcgi_server CONF PORT SOCK: one more nginx server in CONF (before start_nginx), on PORT, passing
# every request to the FastCGI socket SOCK (as the shipped config does, without keep-alive).
fcgi_server() {
  local conf=$1 extra=$OUT/extra.conf
  grep -q "include $extra;" "$conf" || sed -i "0,/http {/s||http {\n  include $extra;|" "$conf"
  echo "server { listen 127.0.0.1:$2; location / { include /etc/nginx/fastcgi_params; fastcgi_pass unix:$3; fastcgi_keep_conn off; } }" >>"$extra"
}

# start_nginx CONF: sets NGINX_PID.
start_nginx() {
  nginx -t -c "$1" >"$OUT/nginx-test.log" 2>&1 || { cat "$OUT/nginx-test.log" >&2; die "bad nginx config"; }
  nginx -c "$1" 2>>"$OUT/nginx-stderr.log" &
  NGINX_PID=$!
  track "$NGINX_PID"
}

# A session on the API at BASE; sets SESSION_ID, ACCESS_TOKEN, REFRESH_TOKEN.
create_session() {
  local base=$1 body
  body=$(curl -s -X POST "$base/v1/weather/session" -H 'Content-Type: application/json' \
    -d "{\"platform\":\"ios\",\"appVersion\":\"1.0\",\"installationId\":\"$(cat /proc/sys/kernel/random/uuid)\"}")
  SESSION_ID=$(sed -n 's/.*"anonymousSessionId" *: *"\([^"]*\)".*/\1/p' <<<"$body")
  ACCESS_TOKEN=$(sed -n 's/.*"weatherAccessToken" *: *"\([^"]*\)".*/\1/p' <<<"$body")
  REFRESH_TOKEN=$(sed -n 's/.*"refreshToken" *: *"\([^"]*\)".*/\1/p' <<<"$body")
  [ -n "$ACCESS_TOKEN" ] || die "session creation at $base failed: $body"
}

# One GET of the benchmark point; prints the status and the body's "cache" field.
weather_probe() {
  local base=$1 header=$2 out
  out=$(curl -s -w '\n%{http_code}' "$base/v1/weather?lat=$BENCH_LAT&lon=$BENCH_LON" -H "$header")
  printf '%s cache=%s\n' "$(tail -1 <<<"$out")" "$(sed -n 's/.*"cache" *: *"\([^"]*\)".*/\1/p' <<<"$out" | head -1)"
}

# wrk_run NAME URL SCRIPT [wrk args...]: runs wrk once and records, in associative arrays keyed
# by NAME, req/s, p50/p99 (ms), errors (HTTP >= 400, counted by wrk, plus socket errors) and the
# request count. Extra environment for the Lua script can be set by the caller.
declare -A RPS P50 P99 ERRS REQS NOTE
wrk_run() {
  local name=$1 url=$2 script=$3; shift 3
  local threads=${THREADS:-2} conns=${CONNECTIONS:-32} dur=${DURATION:-10s} warm=${WARMUP:-1s}
  if [ "${NO_WARMUP:-0}" != 1 ] && [ "$(duration_seconds "$warm")" != 0 ]; then
    BENCH_THREADS=$threads wrk -t"$threads" -c"$conns" -d"$warm" -s "$BENCH_LUA/$script" "$@" "$url" >"$OUT/wrk-$name-warmup.txt" 2>&1 || true
  fi
  log "wrk $name: -t$threads -c$conns -d$dur $url"
  BENCH_THREADS=$threads wrk -t"$threads" -c"$conns" -d"$dur" --latency -s "$BENCH_LUA/$script" "$@" "$url" >"$OUT/wrk-$name.txt" 2>&1 \
    || { cat "$OUT/wrk-$name.txt" >&2; die "wrk $name failed"; }
  local line
  line=$(grep '^BENCH ' "$OUT/wrk-$name.txt" | tail -1)
  [ -n "$line" ] || { cat "$OUT/wrk-$name.txt" >&2; die "wrk $name printed no BENCH line"; }
  RPS[$name]=$(kv rps "$line")
  P50[$name]=$(awk -v u="$(kv p50_us "$line")" 'BEGIN { printf "%.2f", u / 1000 }')
  P99[$name]=$(awk -v u="$(kv p99_us "$line")" 'BEGIN { printf "%.2f", u / 1000 }')
  ERRS[$name]=$(( $(kv http_errors "$line") + $(kv socket_errors "$line") ))
  REQS[$name]=$(kv requests "$line")
  local extra
  extra=$(grep '^NOTE ' "$OUT/wrk-$name.txt" | sed 's/^NOTE //' | tr '\n' ' ' || true)
  NOTE[$name]=${extra% }
  log "  $name: ${RPS[$name]} req/s  p50 ${P50[$name]} ms  p99 ${P99[$name]} ms  errors ${ERRS[$name]}/${REQS[$name]}${NOTE[$name]:+  (${NOTE[$name]})}"
}

kv() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<" $2"; }

# Ratio a/b with two decimals; "n/a" when either is missing or zero.
ratio() {
  awk -v a="${1:-0}" -v b="${2:-0}" 'BEGIN { if (a == 0 || b == 0) print "n/a"; else printf "%.2f", a / b }'
}

# The median of a space-separated LIST of numbers ("n/a" entries skipped), printed with FORMAT
# (%.2f) when it is the mean of the middle two.
median() {
  tr ' ' '\n' <<<"$1" | awk 'NF && $1 != "n/a"' | sort -n |
    awk -v f="${2:-%.2f}" '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else printf f "\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# verdict VALUE OP TARGET: "met" / "NOT met" ("n/a" passes through).
verdict() {
  [ "$1" = n/a ] && { echo "n/a"; return; }
  awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { ok = (op == ">=") ? (v >= t) : (op == "<") ? (v < t) : (v <= t); print ok ? "met" : "NOT met" }'
}

table_row() {  # table_row LABEL NAME [extra cells...]
  local label=$1 name=$2; shift 2
  local cells="| $label | ${RPS[$name]:-n/a} | ${P50[$name]:-n/a} | ${P99[$name]:-n/a} | ${ERRS[$name]:-n/a} / ${REQS[$name]:-n/a} |"
  local c
  for c in "$@"; do cells+=" $c |"; done
  echo "$cells"
}

# The header of a RESULTS.md section: date, command, machine.
results_header() {
  local title=$1 cmd=$2
  local swiftv
  swiftv=$(swift --version 2>&1 | grep -m1 -i 'swift version' || echo unknown)
  cat <<EOF

## $title — $(date -u '+%Y-%m-%d %H:%M UTC')

Command: \`$cmd\`

Machine: nproc $(nproc), kernel $(uname -r), $swiftv, $(nginx -v 2>&1 | sed 's/.*: //'), wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'), load average at start ${LOAD_START:-?}, at end $(cut -d' ' -f1-3 /proc/loadavg)

EOF
}

# ---- the API paths (run.sh, scale.sh) ----

weather_url() { echo "$1/v1/weather?lat=$BENCH_LAT&lon=$BENCH_LON"; }

# seed_pairs NAME BASE COUNT: COUNT live (sessionId, refreshToken) pairs in $OUT/pairs-NAME.txt.
seed_pairs() {
  local name=$1 base=$2 count=$3 per i
  per=$(( (count + THREADS - 1) / THREADS ))
  rm -f "$OUT/pairs-$name.txt".*
  log "seeding $count sessions on $base for the refresh path"
  SEED_FILE=$OUT/pairs-$name.txt SEED_PER_THREAD=$per BENCH_THREADS=$THREADS \
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"$(( $(duration_seconds "$DURATION") * ${REFRESH_HEADROOM:-3} * 20 + 60 ))s" -s "$BENCH_LUA/seed.lua" \
    "$base/v1/weather/session" >"$OUT/wrk-seed-$name.txt" 2>&1 &
  local wpid=$!
  track "$wpid"
  while kill -0 "$wpid" 2>/dev/null; do
    [ "$(cat "$OUT/pairs-$name.txt".* 2>/dev/null | wc -l)" -ge "$count" ] && { kill -INT "$wpid" 2>/dev/null || true; break; }
    sleep 0.2
  done
  wait "$wpid" 2>/dev/null || true
  cat "$OUT/pairs-$name.txt".* >"$OUT/pairs-$name.txt"
  i=$(wc -l <"$OUT/pairs-$name.txt")
  [ "$i" -ge "$count" ] || log "warning: only $i of $count pairs seeded"
}

# The four API paths on one implementation: NAME prefix, base URL, access token, legacy token.
api_paths() {
  local p=$1 base=$2 access=$3 legacy=$4 count
  wrk_run "$p-weather-session" "$(weather_url "$base")" report.lua -H "X-Weather-Session-Token: $access"
  wrk_run "$p-weather-legacy" "$(weather_url "$base")" report.lua -H "X-Weather-Token: $legacy"
  wrk_run "$p-create" "$base/v1/weather/session" create.lua
  count=$(awk -v r="${RPS[$p-create]}" -v d="$(duration_seconds "$DURATION")" -v h="${REFRESH_HEADROOM:-3}" 'BEGIN { printf "%d", r * d * h + 2000 }')
  seed_pairs "$p" "$base" "$count"
  PAIRS_FILE=$OUT/pairs-$p.txt NO_WARMUP=1 wrk_run "$p-refresh" "$base/v1/weather/session/refresh" refresh.lua
}

# CPU clock ticks (utime + stime, threads included) of the processes PIDS..., summed.
# "utime stime" of the gateway's supervisor and its workers (threads included), in clock ticks.
worker_ticks() {
  local p sum_u=0 sum_s=0 f
  for p in $(pgrep -P "$GATEWAY_PID") "$GATEWAY_PID"; do
    f=$(cut -d' ' -f14,15 "/proc/$p/stat" 2>/dev/null) || continue
    sum_u=$((sum_u + ${f% *})) sum_s=$((sum_s + ${f#* }))
  done
  echo "$sum_u $sum_s"
}

cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat"))); done; echo "$t"; }

# measure_cpu NAME URL SCRIPT "PIDS" [wrk args...]: one wrk_run of ROUND (no warm-up) and the CPU
# microseconds per request it cost the processes PIDS (US[NAME]) and nginx's workers (NGX[NAME]).
declare -A US NGX
measure_cpu() {
  local name=$1 url=$2 script=$3 pids=$4 hz a n ngx; shift 4
  hz=$(getconf CLK_TCK) ngx=$(pgrep -P "$NGINX_PID" | tr '\n' ' ')
  # shellcheck disable=SC2086 # lists of pids
  a=$(cpu_ticks $pids) n=$(cpu_ticks $ngx)
  NO_WARMUP=1 DURATION=${ROUND:-5s} wrk_run "$name" "$url" "$script" "$@"
  # shellcheck disable=SC2086
  US[$name]=$(awk -v t=$(( $(cpu_ticks $pids) - a )) -v r="${REQS[$name]}" -v hz="$hz" 'BEGIN { printf "%.1f", t * 1e6 / hz / r }')
  # shellcheck disable=SC2086
  NGX[$name]=$(awk -v t=$(( $(cpu_ticks $ngx) - n )) -v r="${REQS[$name]}" -v hz="$hz" 'BEGIN { printf "%.1f", t * 1e6 / hz / r }')
  log "  responders ${US[$name]} us/req, nginx ${NGX[$name]} us/req"
}

# VmRSS of a process in kB.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# "RssAnon kB anonymous + RssFile kB file-backed": what VmRSS is made of (file pages, the shared
# libraries mostly, are shared with every other worker).
rss_split() { awk '/^RssAnon:/ { a = $2 } /^RssFile:/ { f = $2 } END { printf "%d kB anon + %d kB file", a, f }' "/proc/$1/status"; }
