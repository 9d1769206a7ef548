#!/usr/bin/env bash
# `make dist`: the release bundle dist/closet-weather-<version>-linux-<arch>.tar.gz (docs/dist.md).
#
#   bin/weather-fcgi, bin/weatherctl   release build, Swift runtime + libstdc++ + libgcc static,
#                                      stripped, DT_RPATH=$ORIGIN/../lib
#   lib/                               every other non-glibc shared library they load (ldd closure)
#   htdocs/ migrations/ deploy/ docs/ INSTALL.md README.md CHANGELOG.md
#
# Progress goes to stderr; the only line on stdout is the tarball's path. `--print-version` prints
# the version the bundle would have and builds nothing.
# Environment: CW_VERSION (overrides the version), SWIFT (the swift driver, default `swift`),
# CW_DIST_SCRATCH (build folder, default .build-dist), CW_DIST_OUT (default dist),
# SOURCE_DATE_EPOCH (file times in the tarball, default the last commit's time).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
SWIFT=${SWIFT:-swift}
scratch=${CW_DIST_SCRATCH:-$root/.build-dist}
out=${CW_DIST_OUT:-$root/dist}
arch=$(uname -m)

say() { echo "dist: $*" >&2; }
die() { echo "dist: error: $*" >&2; exit 1; }

# glibc's own libraries: never shipped, always taken from the host (the only runtime requirement).
glibc_re='^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1|lib(c|m|mvec|pthread|dl|rt|resolv|util|anl)\.so\.[0-9]+)$'

# ---- version: CW_VERSION, else the VERSION file, else `git describe`, else 0.1.0 ----------------
version() {
  if [ -n "${CW_VERSION:-}" ]; then echo "$CW_VERSION"; return; fi
  if [ -s VERSION ]; then head -n1 VERSION; return; fi
  local d n
  if d=$(git describe --tags --dirty 2>/dev/null); then echo "${d#v}"; return; fi
  # No tag yet: the count of commits orders two bundles (`sort -V`, semver's pre-release rules);
  # a shallow clone's count is its depth, so it names the commit alone.
  if d=$(git describe --always --dirty 2>/dev/null); then
    if [ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = false ] && n=$(git rev-list --count HEAD 2>/dev/null); then
      echo "0.1.0-dev.$n.g$d"
    else
      echo "0.1.0-g$d"
    fi
    return
  fi
  echo "0.1.0"
}
ver=$(version | tr -d '[:space:]' | tr -c 'A-Za-z0-9._+-' '_')
[ -n "$ver" ] || die "empty version"
# It goes into a 64-byte section of each binary (below), NUL-padded.
[ ${#ver} -lt 64 ] || die "version '$ver' is longer than 63 characters"
case "$#:${1:-}" in
  0:) ;;
  1:--print-version) echo "$ver"; exit 0 ;;
  *) die "usage: scripts/dist.sh [--print-version]" ;;
esac
name="closet-weather-$ver-linux-$arch"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
say "version $ver ($name)"

# ---- build -----------------------------------------------------------------------------------------
# libstdc++: static-stdlib-args.lnk asks for -lstdc++; a folder holding only libstdc++.a, searched
# before the compiler's own folder (where libstdc++.so lives), makes that the static archive.
# libgcc: -static-libgcc to the clang link driver. --disable-new-dtags writes DT_RPATH (not
# DT_RUNPATH), which the loader also uses for the bundled libraries' own dependencies
# (libssl -> libcrypto) and which LD_LIBRARY_PATH cannot override.
linkdir="$scratch/dist-link"
mkdir -p "$linkdir"
stdcxx=$(/usr/bin/env "${CC:-cc}" -print-file-name=libstdc++.a 2>/dev/null || true)
[ -f "$stdcxx" ] || stdcxx=$(ls /usr/lib/gcc/"$arch"-linux-gnu/*/libstdc++.a 2>/dev/null | sort -V | tail -n1)
[ -f "$stdcxx" ] || die "libstdc++.a not found (apt-get install libstdc++-12-dev)"
ln -sfn "$stdcxx" "$linkdir/libstdc++.a"

build_flags=(-c release --static-swift-stdlib --scratch-path "$scratch")
link_flags=(
  -Xlinker -L -Xlinker "$linkdir"
  -Xlinker --disable-new-dtags -Xlinker -rpath -Xlinker '$ORIGIN/../lib'
  -Xswiftc -Xclang-linker -Xswiftc -static-libgcc
)
log="$scratch/dist-build.log"
for attempt in 1 2 3; do
  say "swift build ${build_flags[*]} (attempt $attempt; log $log)"
  if "$SWIFT" build "${build_flags[@]}" "${link_flags[@]}" --product weather-fcgi >"$log" 2>&1 &&
     "$SWIFT" build "${build_flags[@]}" "${link_flags[@]}" --product weatherctl >>"$log" 2>&1; then
    break
  fi
  # Sources edited while the build ran: the next build picks the edit up. Anything else is fatal.
  if [ "$attempt" -lt 3 ] && grep -q 'was modified during the build' "$log"; then continue; fi
  grep -E 'error:' "$log" >&2 || tail -n 30 "$log" >&2
  die "build failed (full log: $log)"
done
bindir=$("$SWIFT" build "${build_flags[@]}" --show-bin-path)

for exe in weather-fcgi weatherctl; do
  needed=$(readelf -d "$bindir/$exe" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "$needed" | grep -Eq '^lib(stdc\+\+|gcc_s|swift|Foundation|dispatch|BlocksRuntime)' &&
    die "$exe still needs a toolchain/compiler runtime library: $(echo $needed)"
  readelf -d "$bindir/$exe" | grep -q '(RPATH).*\$ORIGIN/\.\./lib' || die "$exe lacks DT_RPATH \$ORIGIN/../lib"
done

# ---- stage ---------------------------------------------------------------------------------------
stage=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/cw-dist.XXXXXX")" && pwd -P)  # canonical: compared with ldd paths
trap 'rm -rf "$stage"' EXIT
top="$stage/$name"
mkdir -p "$top/bin" "$top/lib"
# The version goes into each binary's .cw_version section (Sources/CBuildInfo): 64 bytes,
# NUL-padded (at most 63 characters: checked where the version is worked out), replaced in place,
# so a new version needs no rebuild.
version_section="$stage/cw_version"
{ printf '%s' "$ver"; head -c $((64 - ${#ver})) /dev/zero; } >"$version_section"
for exe in weather-fcgi weatherctl; do
  cp "$bindir/$exe" "$top/bin/$exe"
  strip --strip-all "$top/bin/$exe"
  objcopy --update-section .cw_version="$version_section" "$top/bin/$exe"
  chmod 0755 "$top/bin/$exe"
done
rm -f "$version_section"

# lib/: the resolved, non-glibc closure of both binaries, under their sonames.
missing=$(ldd "$top/bin/weather-fcgi" "$top/bin/weatherctl" | grep 'not found' || true)
[ -z "$missing" ] || die "unresolved libraries on the build host:"$'\n'"$missing"
ldd "$top/bin/weather-fcgi" "$top/bin/weatherctl" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' | sort -u |
  while read -r soname path; do
    [[ "$soname" =~ $glibc_re ]] && continue
    cp -L "$path" "$top/lib/$soname"
    chmod 0644 "$top/lib/$soname"
  done

for d in htdocs migrations deploy docs; do
  [ -d "$d" ] || die "missing $d/"
  cp -R "$d" "$top/$d"
done
cp INSTALL.md README.md CHANGELOG.md "$top/"
find "$top" \( -name '.DS_Store' -o -name '*~' -o -name '*.swp' -o -name '*.orig' \) -delete
chmod -R u+rwX,go+rX,go-w "$top"

for f in bin/weather-fcgi bin/weatherctl htdocs/.htaccess htdocs/privacy.html \
         deploy/nginx/closet-weather.conf INSTALL.md README.md CHANGELOG.md docs/openapi.json docs/dist.md; do
  [ -e "$top/$f" ] || die "bundle lacks $f"
done
ls "$top"/migrations/0001_*.sql >/dev/null 2>&1 || die "bundle lacks migrations/0001_*.sql"

# ---- verify the staged bundle --------------------------------------------------------------------
# Every library resolves inside lib/ or is glibc's; the binary answers a CGI health request with
# an empty environment.
ldd "$top/bin/weather-fcgi" "$top/bin/weatherctl" | while read -r first arrow path _; do
  case "$first" in */weather-fcgi:|*/weatherctl:) continue ;; esac
  [ "$arrow" = "=>" ] || path=$first
  if [[ "$first" =~ $glibc_re ]] || [[ "$(basename "$path")" =~ $glibc_re ]]; then continue; fi
  resolved=$(readlink -f "$path")
  [[ "$resolved" == "$top/lib/"* ]] || die "$first resolves outside the bundle: $path"
done
for exe in weather-fcgi weatherctl; do
  said=$(cd "$top" && env -i LD_LIBRARY_PATH= PATH=/usr/bin:/bin ./bin/$exe --version 2>&1) || die "bin/$exe --version failed: $said"
  [ "$said" = "$exe $ver" ] || die "bin/$exe --version says '$said', not '$exe $ver'"
done
db=$stage/verify.sqlite3
health=$(cd "$top" && env -i LD_LIBRARY_PATH= PATH=/usr/bin:/bin REQUEST_METHOD=GET REQUEST_URI=/v1/health \
         WEATHER_DB_PATH="$db" ./bin/weather-fcgi 2>/dev/null) || die "bin/weather-fcgi failed: $health"
case "$health" in "Status: 200"*'"status":"ok"'*) ;; *) die "health check answered: $health" ;; esac
rm -f "$db" "$db"-*

# ---- pack ----------------------------------------------------------------------------------------
mkdir -p "$out"
tarball="$out/$name.tar.gz"
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$epoch" -C "$stage" -cf - "$name" |
  gzip -n -9 >"$tarball.tmp"
mv "$tarball.tmp" "$tarball"

glibc=$(objdump -T "$top"/bin/* "$top"/lib/* 2>/dev/null | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n1)
say "bin: $(du -sh "$top/bin" | cut -f1), lib: $(ls "$top/lib" | wc -l) files $(du -sh "$top/lib" | cut -f1); needs ${glibc/_/ >= }"
say "wrote $tarball ($(du -h "$tarball" | cut -f1))"
echo "$tarball"
