#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and `make run` need, only when missing.
# Idempotent; the one place that lists them (README's two commands both call it).
set -euo pipefail
packages=(
  pkg-config libfcgi-dev libsqlite3-dev libssl-dev zlib1g-dev  # build: C libraries
  nginx spawn-fcgi libfcgi-bin sqlite3 python3 python3-venv curl openssl # run and tests (venv: schemathesis; openssl: test certificates)
  procps git                                                             # tests: pgrep (worker pids), git (the dist test's archive)
  apache2 libapache2-mod-fcgid                                           # shared-hosting tests
  binutils                                                               # make dist: strip, objcopy (the version)
)
[ "${WITH_BENCH:-0}" = 1 ] && packages+=(wrk valgrind strace)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  # Apache and nginx must not start as system services here: tests run private instances.
  DEBIAN_FRONTEND=noninteractive RUNLEVEL=1 $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# With WITH_TESTS=1 (make test): schemathesis, pinned, for the OpenAPI test (SchemathesisTests),
# in a private virtualenv under .build, installed here from PyPI so that the test run itself needs
# no network. `make run` does not need it.
venv="$(cd "$(dirname "$0")/.." && pwd)/.build/schemathesis-venv"
if [ "${WITH_TESTS:-0}" = 1 ] && [ ! -x "$venv/bin/st" ]; then
  echo "installing schemathesis into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q schemathesis==4.32.5
fi
