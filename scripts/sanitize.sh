#!/usr/bin/env bash
# Runs every test (unit and end-to-end) on builds made with ThreadSanitizer and AddressSanitizer:
# `make sanitize`, or `scripts/sanitize.sh thread|address` for one. Each sanitizer builds in a
# scratch folder of its own (.build/sanitize-KIND), so the ordinary debug build is left as it is,
# and the end-to-end tests start that build's `weather-fcgi` and `weatherctl`.
#
# A run fails when a test fails or when any process wrote a report: the test process is told
# where to write by TSAN_OPTIONS/ASAN_OPTIONS, the programs by their built-in defaults
# (Sources/CSanitizerOptions), because the tests start them with environments of their own. The
# reports are kept in /tmp/closet-weather-sanitizer/KIND. Leaks are not checked (see
# docs/reliability.md, "Sanitizers"). Takes about 4 minutes a sanitizer on the 2-core machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
kinds=("$@")
[ ${#kinds[@]} -eq 0 ] && kinds=(thread address)
WITH_TESTS=1 scripts/install-deps.sh
failed=()
for kind in "${kinds[@]}"; do
  case "$kind" in
    thread) options="halt_on_error=0" var=TSAN_OPTIONS ;;
    address) options="detect_leaks=0" var=ASAN_OPTIONS ;;
    *) echo "usage: $0 [thread|address]..." >&2; exit 64 ;;
  esac
  scratch=$root/.build/sanitize-$kind
  # The programs' built-in log_path (Sources/CSanitizerOptions); open to every user, as some
  # tests run the programs as nobody or as a user id of their own.
  reports=/tmp/closet-weather-sanitizer/$kind
  rm -rf "$reports"
  mkdir -p "$reports"
  chmod 1777 /tmp/closet-weather-sanitizer "$reports"
  echo "sanitize: $kind: building in $scratch" >&2
  swift build --build-tests --sanitize="$kind" --scratch-path "$scratch"
  bin=$(swift build --sanitize="$kind" --scratch-path "$scratch" --show-bin-path)
  status=0
  env "$var=$options:log_path=$reports/report" CW_BIN_DIR="$bin" \
    swift test --skip-build --sanitize="$kind" --scratch-path "$scratch" || status=$?
  found=$(find "$reports" -type f | sort)
  if [ -n "$found" ]; then
    echo "sanitize: $kind: reports written:" >&2
    for f in $found; do echo "== $f" >&2; head -60 "$f" >&2; done
    failed+=("$kind")
  elif [ "$status" -ne 0 ]; then
    echo "sanitize: $kind: tests failed (exit $status), no sanitizer report" >&2
    failed+=("$kind")
  else
    echo "sanitize: $kind: every test passed, no report" >&2
  fi
done
[ ${#failed[@]} -eq 0 ] || { echo "sanitize: FAILED: ${failed[*]}" >&2; exit 1; }
echo "sanitize: OK (${kinds[*]})" >&2
