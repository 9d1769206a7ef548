#!/usr/bin/env bash
# Builds the libFuzzer target fuzz/.build/fuzz-request from the production sources that parse
# client input (all of WeatherCore, Request, Response, JSON, WeatherParameters) and provider
# answers (the Caiyun and Visual Crossing normalisers, without their transport) plus
# fuzz/FuzzRequest.swift, compiled as ONE module with -sanitize=fuzzer,address. (A SwiftPM
# executable target cannot link libFuzzer's main, hence plain swiftc.) None of these files needs
# SQLite, the CHTTPClient HTTP client, OpenSSL or libfcgi, so no C module or stub is involved.
# usage: fuzz/build.sh            prints the path of the binary on stdout
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/fuzz/.build
mkdir -p "$out"
swiftc=${SWIFTC:-$(command -v swiftc || echo /opt/swift/usr/bin/swiftc)}
sources=(
  $(find "$root/Sources/WeatherCore" -name '*.swift' | sort)
  "$root/Sources/WeatherAPI/Server/FieldList.swift"
  "$root/Sources/WeatherAPI/Server/Request.swift"
  "$root/Sources/WeatherAPI/Server/Response.swift"
  "$root/Sources/WeatherAPI/Server/HTTPError.swift"
  $(find "$root/Sources/WeatherAPI/JSON" -name '*.swift' | sort)
  "$root/Sources/WeatherAPI/Handlers/WeatherParameters.swift"
  $(find "$root/Sources/WeatherProviders/Caiyun" "$root/Sources/WeatherProviders/VisualCrossing" \
         "$root/Sources/WeatherProviders/Provider" -name '*.swift' | sort)
  "$root/Sources/WeatherProviders/Transport/HTTPResult.swift"
  "$root/Sources/WeatherProviders/Transport/HTTPTransport.swift"
  "$root/Sources/FastCGIRuntime/RecordWalk.swift"
  "$root/fuzz/FuzzRequest.swift"
)
# Rebuild only when a source is newer than the binary.
bin=$out/fuzz-request
if [ -x "$bin" ] && [ -z "$(find "${sources[@]}" "$0" -newer "$bin" 2>/dev/null | head -1)" ]; then
  echo "$bin"; exit 0
fi
# One module named WeatherCore: the `import WeatherCore` lines of the WeatherAPI files then only
# warn ("ignoring import"). ld.gold's "Cannot export local symbol __asan_*" warnings are noise.
"$swiftc" -sanitize=fuzzer,address -parse-as-library ${FUZZ_OPT:--O} -g -swift-version 6 \
  -module-name WeatherCore -package-name closet_weather -enable-upcoming-feature ExistentialAny \
  "${sources[@]}" -o "$bin.tmp" >"$out/build.log" 2>&1 \
  || { grep -v 'Cannot export local symbol' "$out/build.log" >&2; exit 1; }
mv "$bin.tmp" "$bin"
echo "$bin"
