#!/usr/bin/env python3
"""Writes the seed corpus of the request fuzzer into fuzz/corpus/ (see FuzzRequest.swift for the
input layout: selector, flags, URI 0x1E QUERY_STRING 0x1E HEADERS(0x1F-separated) 0x1E BODY).
Re-running it rewrites the seed-*.bin files; entries libFuzzer added are left alone."""
import os

RS, US = b"\x1e", b"\x1f"
GET, POST, LOWER, RAW = 0, 3, 5, 7
# flags: bits 0-2 Content-Length mode (0 none, 1 exact, 3 longer than body, 4 huge, 5 negative,
# 6 4096+selector, 7 from header), bits 3-4 Content-Type (0 json, 1 json+charset, 2 from header,
# 3 none), 0x20 SCRIPT_NAME+PATH_INFO, 0x40 mount prefix /api, 0x80 short body.
EXACT = 1

def entry(selector, flags, uri=b"", qs=b"", headers=(), body=b""):
    return bytes([selector, flags]) + uri + RS + qs + RS + US.join(headers) + RS + body

create = b'{"platform":"ios","appVersion":"1.0","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}'
proof = b'{"anonymousSessionId":"aws_AbCdEfGhIjKlMnOpQrStUv","refreshToken":"wtr_' + b"A" * 43 + b'"}'
seeds = {
    "health": entry(GET, 0x18, b"/v1/health"),
    "weather": entry(GET, 0x18, b"/v1/weather?lat=31.2304&lon=121.4737&days=7",
                     headers=[b"X-Weather-Session-Token=wta_" + b"x" * 43]),
    "trip": entry(GET, 0x18, b"/v1/weather/trip?lat=48.85&lon=2.35&start=2026-12-20&end=2026-12-24"),
    "trip-qs-only": entry(GET, 0x18, b"/v1/weather/trip", b"lat=-33.9&lon=+151.2&start=2026-11-29&end=2027-12-01"),
    "create": entry(POST, EXACT, b"/v1/weather/session", body=create),
    "refresh": entry(POST, EXACT | 0x08, b"/v1/weather/session/refresh", body=proof),
    "content-length-huge": entry(POST, 4, b"/v1/weather/session", body=create),
    "content-length-4097": entry(POST, 6, b"/v1/weather/session", body=create),
    "content-length-negative": entry(POST, 5, b"/v1/weather/session", body=create),
    "content-length-longer-than-body": entry(POST, 3, b"/v1/weather/session", body=create),
    "short-body": entry(POST, EXACT | 0x80, b"/v1/weather/session", body=create),
    # A body without a length, as Apache's plain CGI passes a chunked one: read to its end.
    "chunked-no-length": entry(POST, 0, b"/v1/weather/session", headers=[b"TRANSFER-ENCODING=chunked"], body=create),
    "chunked-over-limit": entry(POST, 0, b"/v1/weather/session", headers=[b"TRANSFER-ENCODING=chunked"], body=b" " * 4097),
    "invalid-utf8-query": entry(GET, 0x18, b"/v1/weather?lat=%FF%FE&lon=%C3%28"),
    "invalid-utf8-raw": entry(GET, 0x18, b"/v1/\xc3\x28weather?lat=\xed\xa0\x80&lon=\xf8\x88\x80\x80\x80"),
    "invalid-utf8-body": entry(POST, EXACT, b"/v1/weather/session",
                               body=b'{"platform":"\xff\xfe","installationId":"\xc0\xaf"}'),
    "deep-array": entry(POST, EXACT, b"/v1/weather/session", body=b"[" * 4000),
    "deep-object": entry(POST, EXACT, b"/v1/weather/session/refresh", body=b'{"a":' * 800 + b"1" + b"}" * 800),
    "nul-bytes": entry(GET, 0x18, b"/v1/weather\x00x?lat=1%00&lon=2", headers=[b"X-Weather-Token=a\x00b"],
                       body=b"\x00\x00"),
    "nul-body": entry(POST, EXACT, b"/v1/weather/session", body=b'{"platform":"ios\x00","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}'),
    "duplicate-params": entry(GET, 0x18, b"/v1/weather?lat=1&lat=2&lon=3&days=3&days=4"),
    "duplicate-json-keys": entry(POST, EXACT, b"/v1/weather/session",
                                 body=b'{"platform":"ios","platform":"android","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}'),
    "percent-escapes": entry(GET, 0x18, b"/v1/%77eather?lat=%2B31.5&lon=-1%2E5&days=%31+&x=%&y=%4&z=%G1"),
    "number-forms": entry(GET, 0x18, b"/v1/weather?lat=1e5&lon=0x1p3&days=00"),
    "nan-inf": entry(GET, 0x18, b"/v1/weather?lat=nan&lon=-inf&days=16"),
    "long-decimal": entry(GET, 0x18, b"/v1/weather?lat=" + b"9" * 30 + b"&lon=-." + b"0" * 20 + b"1"),
    "wrong-json-types": entry(POST, EXACT, b"/v1/weather/session", body=b'{"platform":1,"appVersion":[],"installationId":null}'),
    "lone-surrogate": entry(POST, EXACT | 0x08, b"/v1/weather/session", body=b'{"platform":"\\ud800","installationId":"\\udfff\\u0000"}'),
    "script-name-prefix": entry(GET, 0x18 | 0x20 | 0x40, b"/api/v1/weather?lat=0&lon=0"),
    "lowercase-method": entry(LOWER, 0x18, b"/v1/health"),
    "raw-method": entry(RAW | (6 << 3), 0x18, b"PATCH\xff/v1/health"),
    "bad-dates": entry(GET, 0x18, b"/v1/weather/trip?lat=1&lon=1&start=2026-02-30&end=10000-01-01"),
    "content-type-from-header": entry(POST, 7 | 0x10, b"/v1/weather/session",
                                      headers=[b"CONTENT-TYPE=application/json;charset=\xff", b"CONTENT-LENGTH=2"], body=b"{}"),
    # Shaped like a provider's answer (JSONValue reads every body, as it reads provider answers).
    "provider-answer": entry(POST, EXACT, b"/v1/weather/session", body=b'{"status":"ok","server_time":1796004011,"timezone":"Asia\\/Shanghai",'
                             b'"result":{"realtime":{"temperature":12.3,"humidity":0.62,"wind":{"speed":9.4},"precipitation":{"local":{"intensity":0}}},'
                             b'"daily":{"temperature":[{"date":"2026-11-30T00:00+08:00","min":8,"max":14.5}],"skycon":[{"date":"2026-11-30","value":"CLOUDY"}]}},'
                             b'"n":[-0,1E+2,2.5e-5,123456789012345678,"\\u4e2d"],"dup":1,"dup":[true,false,null]}'),
    "big-header": entry(GET, 0x18, b"/v1/health", headers=[b"X-Big=" + b"A" * 3000, b"X-Request-Id=" + b"r" * 200]),
}

# The provider fixtures the tests use, minified to fit -max_len, as bodies: FuzzRequest.swift also
# normalises every body as a Caiyun and a Visual Crossing answer. Selector 6 asks 7 days; flag
# 0x80 makes it a 3-day trip from 2026-11-30 instead.
import json
fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Tests", "WeatherProvidersTests", "Fixtures")
def minified(name):
    with open(os.path.join(fixtures, name), "rb") as f:
        return json.dumps(json.load(f), separators=(",", ":"), ensure_ascii=False).encode()
seeds["caiyun-forecast"] = entry(6, EXACT, b"/v1/weather/session", body=minified("caiyun-v2.6-weather.json"))
seeds["caiyun-trip"] = entry(6, EXACT | 0x80, b"/v1/weather/session", body=minified("caiyun-v2.6-weather.json"))
seeds["visualcrossing-forecast"] = entry(6, EXACT, b"/v1/weather/session", body=minified("visualcrossing-timeline-forecast.json"))
seeds["visualcrossing-trip"] = entry(6, EXACT | 0x80, b"/v1/weather/session", body=minified("visualcrossing-timeline-trip.json"))

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, "seed-" + name + ".bin"), "wb") as f:
        f.write(data)
print(f"{len(seeds)} seeds in {here}")
