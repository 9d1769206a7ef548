#!/usr/bin/env bash
# Fuzzes the request parsers (fuzz/FuzzRequest.swift) for a fixed time budget.
# usage: fuzz/run.sh [SECONDS] [--merge]       (default 60 s)
#   New interesting inputs are written to FUZZ_CORPUS_OUT (default fuzz/corpus/, the seed corpus,
#   so a manual run grows it; make test points it at a scratch folder). --merge afterwards
#   minimizes fuzz/corpus (+ the scratch folder) back into fuzz/corpus.
#   Crash/timeout/OOM inputs go to FUZZ_ARTIFACTS (default fuzz/.build/artifacts/); replay one
#   with `fuzz/.build/fuzz-request FILE`.
# Exit status: 0 when the budget ran out without a finding, non-zero otherwise.
# Environment: FUZZ_OPT (-O; -Onone builds 4x faster), FUZZ_CORPUS_OUT, FUZZ_ARTIFACTS.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=60 merge=0
for a in "$@"; do
  case $a in
    --merge) merge=1 ;;
    ''|*[!0-9]*) echo "usage: fuzz/run.sh [SECONDS] [--merge]" >&2; exit 2 ;;
    *) seconds=$a ;;
  esac
done
corpus=$root/fuzz/corpus
work=${FUZZ_CORPUS_OUT:-$corpus}
artifacts=${FUZZ_ARTIFACTS:-$root/fuzz/.build/artifacts}
mkdir -p "$work" "$artifacts"
artifacts=$(cd "$artifacts" && pwd)

bin=$("$root/fuzz/build.sh")
before=$(ls "$artifacts" | wc -l)
dirs=("$work")
[ "$work" -ef "$corpus" ] || dirs+=("$corpus")
echo "fuzzing for ${seconds}s: $bin ${dirs[*]}" >&2
status=0
# Leak checking off: the Swift runtime's one-time allocations (metadata caches) are not leaks.
# The Swift runtime backtracer fights ASan over a crash (it can hang); libFuzzer reports instead.
export SWIFT_BACKTRACE=${SWIFT_BACKTRACE:-enable=no}
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$bin" -max_total_time="$seconds" -max_len=8192 -timeout=10 \
  -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" "${dirs[@]}" || status=$?
after=$(ls "$artifacts" | wc -l)
if [ "$status" -ne 0 ] || [ "$after" -ne "$before" ]; then
  echo "fuzz: FAILED (exit $status); artifacts in $artifacts:" >&2
  ls -l "$artifacts" >&2
  exit $(( status == 0 ? 1 : status ))
fi
if [ "$merge" = 1 ]; then
  tmp=$(mktemp -d)
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} "$bin" -merge=1 -max_len=8192 "$tmp" "${dirs[@]}" >&2
  # Keep the named seeds; replace the rest with the minimized set.
  find "$corpus" -type f ! -name 'seed-*' -delete
  cp "$tmp"/* "$corpus"/ 2>/dev/null || true
  rm -rf "$tmp"
  echo "fuzz: merged corpus: $(ls "$corpus" | wc -l) files" >&2
fi
echo "fuzz: OK, no finding in ${seconds}s" >&2
