#!/usr/bin/env bash
# How long the workers' own clean-up (WEATHER_PRUNE_INTERVAL) holds the worker that runs it: a
# database of SESSIONS sessions (3 token rows each, as bench/scale.sh seeds them) of which
# DOOMED_PERCENT were revoked long ago (on 2026-02-01) (their sessions and tokens go), and the same run again
# with nothing left to delete (the daily case where the timer kept up). Each run is one plain-CGI
# `GET /v1/health` whose clean-up is due: the process's wall time and peak RSS, and its
# `clean_up=` log line (done, or partial: the worker's 3 s walk limit cut it, the rest waits for
# the next look; the table then has one row per run until done). The database's pages are in the
# page cache.
# usage: SESSIONS=1000000 DOOMED_PERCENT=50 bench/cleanup.sh [--label TEXT]   (GATEWAY_BIN to measure another build)
source "$(dirname "$0")/lib.sh"
bench_args "$@"
bench_init cleanup
build_gateway
sessions=${SESSIONS:-100000} doomed=${DOOMED_PERCENT:-50}
db=$OUT/db/w.sqlite3
mkdir -p "$OUT/db"
export WEATHER_DB_PATH=$db WEATHER_HASH_KEY=$BENCH_HASH_KEY

cgi_health() {  # one CGI request; prints "wall_s peak_kB outcome duration_ms deleted"
  local line
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" env REQUEST_METHOD=GET REQUEST_URI=/v1/health "$GATEWAY_BIN" >/dev/null 2>"$OUT/cgi.log"
  line=$(grep -o 'clean_up=[a-z]* duration_ms=[0-9.]* deleted=[0-9]*' "$OUT/cgi.log" || echo "clean_up=none duration_ms=- deleted=-")
  echo "$(cat "$OUT/time.txt") $(echo "$line" | sed 's/[a-z_]*=//g')"
}

cgi_health >/dev/null  # creates and migrates the database (its first clean-up finds nothing)
log "seeding $sessions sessions, $doomed% revoked long ago (on 2026-02-01)"
seed_doomed_sessions "$db" "$sessions" "$doomed"
due() { sqlite3 "$db" "UPDATE weather_maintenance SET started_at = started_at - 200000"; }
cat "$db" "$db-wal" >/dev/null 2>&1 || true  # into the page cache
runs=()
while :; do  # until a run is done (each partial one leaves the clean-up due)
  due; runs+=("$(cgi_health)")
  case ${runs[-1]} in *" partial "*) [ ${#runs[@]} -lt 100 ] || die "still partial after 100 runs" ;; *) break ;; esac
done
due; second=$(cgi_health)
log "with deletions: ${runs[*]}; nothing left: $second (wall s, peak kB, outcome, clean-up ms, rows deleted)"
{
  results_header "bench/cleanup.sh${label:+ ($label)}" "SESSIONS=$sessions DOOMED_PERCENT=$doomed bench/cleanup.sh $args"
  echo "One plain-CGI \`GET /v1/health\` whose workers' clean-up is due, on $sessions sessions ($((sessions * 3)) token rows), $doomed% of them revoked long ago (on 2026-02-01); then again with nothing left to delete. The request's answer waits for it under CGI; a FastCGI worker serves nobody meanwhile."
  echo
  echo "| run | wall s | peak RSS kB | clean_up | duration_ms | rows deleted |"
  echo "|---|---:|---:|---|---:|---:|"
  i=0
  for r in "${runs[@]}"; do i=$((i + 1)); read -r w m o d n <<<"$r"; echo "| $doomed% doomed, run $i | $w | $m | $o | $d | $n |"; done
  read -r w m o d n <<<"$second"; echo "| nothing left | $w | $m | $o | $d | $n |"
} >>"$RESULTS"
log "results appended to $RESULTS"
