#!/usr/bin/env python3
"""Loopback fake of the Caiyun v2.6 and Visual Crossing timeline APIs, for tests only.

It answers in the shapes of the fixture files, with dates computed from the request, and can be
switched per provider into failure modes. It listens on 127.0.0.1 only and must never be given a
real provider key: the key in the path or query is accepted as is and never checked.

    python3 fake_provider.py --port 0 --port-file /tmp/port [--fixtures DIR]

Routes (one server serves both providers; point both base URLs at http://127.0.0.1:PORT, i.e.
set CAIYUN_BASE_URL and VISUAL_CROSSING_BASE_URL, with any CAIYUN_API_TOKEN and
VISUAL_CROSSING_API_KEY, as Tests/EndToEndTests/Support/FakeProviders.swift does):
    GET  /v2.6/{token}/{lon},{lat}/weather?...dailysteps=N              Caiyun
    GET  /VisualCrossingWebServices/rest/services/timeline/{lat},{lon}[/{start}/{end}]?...
    POST /_mode?provider=caiyun|visualcrossing&mode=M[&delay=SECONDS]   set a provider's mode
    GET  /_calls                       JSON list of {provider, path, query}, keys shown as "<key>"
    POST /_reset                       forget calls and modes

Modes: ok, integers, missing_optional, extra_fields, html_error, rate_limited, unauthorized,
error_body, garbage, slow, reset, short (one day fewer than asked), broken_gzip_503,
day_not_turned (Caiyun only: the series starts at the place's yesterday, as a provider whose day
has not turned answers just after midnight).
"""

import argparse
import copy
import datetime as dt
import gzip
import json
import os
import signal
import socket
import struct
import sys
import ssl
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = {
    "ok", "integers", "missing_optional", "extra_fields", "html_error", "rate_limited",
    "unauthorized", "error_body", "garbage", "slow", "reset", "short", "broken_gzip_503",
    "day_not_turned",
}
# Modes that answer like "ok" but frame the body differently, to exercise the client's HTTP/1.1.
FRAMINGS = {
    "chunked",       # Transfer-Encoding: chunked, with a chunk extension and a trailer
    "gzip",          # Content-Encoding: gzip when the client accepts it
    "until_close",   # no Content-Length: the body ends when the server closes the connection
    "close_after",   # Content-Length, then the server closes without saying so
}
MODES |= FRAMINGS
# Modes that keep the client's socket readable for `delay` seconds (30 by default) without ever
# completing an answer; the client must stop on its own caps or deadline.
FLOODS = {
    "flood_interim",    # "100 Continue" heads, one after another
    "flood_trailer",    # a one-byte chunked body, then trailer lines without end
    "flood_extension",  # one-byte chunks, each with a 4,000-byte chunk extension
}
MODES |= FLOODS
PROVIDERS = ("caiyun", "visualcrossing")
VC_PREFIX = "/VisualCrossingWebServices/rest/services/timeline/"

HTML_502 = (b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
            b"<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>\n")


class State:
    """Calls and modes, shared by the handler threads."""

    def __init__(self, fixtures):
        self.lock = threading.Lock()
        self.fixtures = fixtures
        self.calls = []
        self.connections = 0
        self.modes = {}

    def record(self, provider, path, query):
        with self.lock:
            self.calls.append({"provider": provider, "path": path, "query": query})

    def mode(self, provider):
        with self.lock:
            return self.modes.get(provider, ("ok", 0.0))


def load_fixtures(folder):
    def load(name):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            return json.load(f)
    return {
        "caiyun": load("caiyun-v2.6-weather.json"),
        "caiyun_error": load("caiyun-v2.6-error-400.json"),
        "vc_forecast": load("visualcrossing-timeline-forecast.json"),
        "vc_trip": load("visualcrossing-timeline-trip.json"),
    }


def to_integers(value):
    """Every float becomes an int, as real payloads send `5` where the fixtures send `5.0`."""
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return int(round(value))
    if isinstance(value, list):
        return [to_integers(v) for v in value]
    if isinstance(value, dict):
        return {k: to_integers(v) for k, v in value.items()}
    return value


def utc_now():
    return dt.datetime.now(dt.timezone.utc)


def caiyun_payload(fixtures, steps, mode):
    body = copy.deepcopy(fixtures["caiyun"])
    today = (utc_now() + dt.timedelta(hours=8)).date()  # Caiyun's local today in Asia/Shanghai
    if mode == "day_not_turned":
        today -= dt.timedelta(days=1)
    if mode == "short":
        steps = max(0, steps - 1)
    daily = body["result"]["daily"]
    for series, entries in list(daily.items()):
        if not isinstance(entries, list):
            continue
        made = []
        for i in range(steps):
            entry = copy.deepcopy(entries[i % len(entries)])
            entry["date"] = (today + dt.timedelta(days=i)).isoformat() + "T00:00+08:00"
            made.append(entry)
        daily[series] = made
    daily["life_index"] = {}
    body["server_time"] = int(time.time())
    if mode == "integers":
        body = to_integers(body)
    elif mode == "missing_optional":
        del body["result"]["realtime"]["apparent_temperature"]
        del body["result"]["realtime"]["precipitation"]
        if len(body["result"]["daily"]["precipitation"]) > 1:
            del body["result"]["daily"]["precipitation"][1]["probability"]
        del body["server_time"]
    elif mode == "extra_fields":
        body["x_new_top_level"] = {"nested": [1, 2.5, None, "s"]}
        body["result"]["realtime"]["x_new_realtime"] = 42
        body["result"]["daily"]["x_new_series"] = [{"date": "2026-01-01T00:00+08:00", "value": 1}]
        for entry in body["result"]["daily"]["temperature"]:
            entry["x_extra"] = True
    return body


def vc_payload(fixtures, start, end, mode):
    today = utc_now().date()
    if start is None:
        start, end = today, today + dt.timedelta(days=14)
        template = fixtures["vc_forecast"]
    else:
        template = fixtures["vc_trip"]
    body = copy.deepcopy(template)
    # Like the real API: current conditions only when the range includes today.
    current = fixtures["vc_forecast"]["currentConditions"] if start <= today <= end else None
    body.pop("currentConditions", None)
    count = (end - start).days + 1
    if mode == "short":
        count = max(0, count - 1)
    days = []
    for i in range(count):
        day = copy.deepcopy(template["days"][i % len(template["days"])])
        date = start + dt.timedelta(days=i)
        day["datetime"] = date.isoformat()
        day["datetimeEpoch"] = int(dt.datetime(date.year, date.month, date.day, tzinfo=dt.timezone.utc).timestamp())
        days.append(day)
    body["days"] = days
    body["queryCost"] = count
    if current is not None:
        current = copy.deepcopy(current)
        current["datetimeEpoch"] = int(time.time())
        body["currentConditions"] = current
    if mode == "integers":
        body = to_integers(body)
    elif mode == "missing_optional":
        if "currentConditions" in body:
            del body["currentConditions"]["feelslike"]
            del body["currentConditions"]["precip"]
        if len(body["days"]) > 1:
            del body["days"][1]["precipprob"]
        if body["days"]:
            body["days"][0]["precipprob"] = None
    elif mode == "extra_fields":
        body["x_new_top_level"] = {"nested": [1, 2.5, None, "s"]}
        for day in body["days"]:
            day["x_extra"] = {"a": 1}
        if "currentConditions" in body:
            body["currentConditions"]["x_extra"] = "new"
    return body


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real providers do
    server_version = "fake-provider"
    sys_version = ""

    def log_message(self, fmt, *args):  # quiet: tests read /_calls instead
        pass

    def setup(self):
        super().setup()
        with self.server.state.lock:
            self.server.state.connections += 1

    # -- plumbing --------------------------------------------------------------------------

    def send(self, status, body, content_type="application/json; charset=utf-8", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body, ensure_ascii=False).encode("utf-8")
        elif isinstance(body, str):
            body = body.encode("utf-8")
        framing = getattr(self, "framing", None)
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if framing == "gzip" and "gzip" in (self.headers.get("Accept-Encoding") or ""):
            body = gzip.compress(body)
            self.send_header("Content-Encoding", "gzip")
        if framing == "chunked":
            self.send_header("Transfer-Encoding", "chunked")
        elif framing == "until_close":
            self.close_connection = True
        else:
            self.send_header("Content-Length", str(len(body)))
        if framing == "close_after":
            self.close_connection = True
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if framing == "chunked":
            pieces = [body[i:i + 1000] for i in range(0, len(body), 1000)]
            body = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";ext=1" if i == 0 else b"", p)
                            for i, p in enumerate(pieces)) + b"0\r\nX-Trailer: yes\r\n\r\n"
        try:
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout tests); nothing to do

    def flood(self, mode, seconds):
        """Writes `mode`'s endless answer for `seconds` or until the client hangs up."""
        self.close_connection = True
        if mode == "flood_interim":
            unit = b"HTTP/1.1 100 Continue\r\n\r\n"
        else:
            start = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            if mode == "flood_trailer":
                start += b"1\r\n{\r\n0\r\n"
                unit = b"X-Trailer: " + b"a" * 100 + b"\r\n"
            else:
                unit = b"1;" + b"e" * 4000 + b"\r\n \r\n"
        block = unit * max(1, 65536 // len(unit))
        end = time.monotonic() + seconds
        try:
            if mode != "flood_interim":
                self.wfile.write(start)
            while time.monotonic() < end:
                self.wfile.write(block)
                self.wfile.flush()
        except OSError:
            pass  # the client gave up, as it should

    def abort_connection(self):
        """Reset the connection without a byte of answer (SO_LINGER 0 → RST)."""
        try:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    # -- routes ----------------------------------------------------------------------------

    def do_POST(self):
        url = urllib.parse.urlsplit(self.path)
        params = dict(urllib.parse.parse_qsl(url.query))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        state = self.server.state
        if url.path == "/_mode":
            provider, mode = params.get("provider"), params.get("mode")
            if provider not in PROVIDERS or mode not in MODES:
                return self.send(400, {"error": "provider must be one of %s, mode one of %s"
                                        % (sorted(PROVIDERS), sorted(MODES))})
            try:
                delay = float(params.get("delay", "0"))
            except ValueError:
                return self.send(400, {"error": "delay must be a number"})
            with state.lock:
                state.modes[provider] = (mode, delay)
            return self.send(200, {"provider": provider, "mode": mode, "delay": delay})
        if url.path == "/_reset":
            with state.lock:
                state.calls.clear()
                state.modes.clear()
            return self.send(200, {"reset": True})
        return self.send(404, {"error": "not found"})

    def do_GET(self):
        self.framing = None
        url = urllib.parse.urlsplit(self.path)
        state = self.server.state
        if url.path == "/_calls":
            with state.lock:
                calls = list(state.calls)
            return self.send(200, calls)
        if url.path == "/_connections":
            with state.lock:
                connections = state.connections
            return self.send(200, {"connections": connections})
        parts = url.path.split("/")
        params = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        query = {k: v[-1] for k, v in params.items()}
        # ['', 'v2.6', token, 'lon,lat', 'weather']
        if len(parts) == 5 and parts[1] == "v2.6" and parts[4] == "weather":
            recorded = "/".join(parts[:2] + ["<key>"] + parts[3:])
            state.record("caiyun", recorded, query)
            return self.caiyun(query)
        if url.path.startswith(VC_PREFIX):
            if "key" in query:
                query["key"] = "<key>"
            state.record("visualcrossing", url.path, query)
            return self.visualcrossing(url.path[len(VC_PREFIX):].split("/"), query)
        return self.send(404, {"error": "not found"})

    def common_failure(self, provider, mode, delay):
        """Modes that look the same for both providers; returns True when it answered."""
        if mode in FRAMINGS:
            self.framing = mode
            return False
        if mode in FLOODS:
            self.flood(mode, delay or 30)
            return True
        if mode == "slow":
            time.sleep(delay)
            return False
        if mode == "reset":
            self.abort_connection()
            return True
        if mode == "html_error":
            self.send(502, HTML_502, content_type="text/html")
            return True
        if mode == "garbage":
            self.send(200, b'{"status": "ok", "result": {"daily": [1, 2,', content_type="application/json")
            return True
        if mode == "broken_gzip_503":  # a gateway's error page whose gzip stream is cut short
            page = gzip.compress(HTML_502)[:20]
            self.send(503, page, content_type="text/html", headers={"Content-Encoding": "gzip"})
            return True
        return False

    def caiyun(self, query):
        mode, delay = self.server.state.mode("caiyun")
        if self.common_failure("caiyun", mode, delay):
            return
        fixtures = self.server.state.fixtures
        if mode == "rate_limited":
            return self.send(429, {"status": "failed", "error": "rate limit exceeded", "api_version": "v2.6"},
                             headers={"Retry-After": "30"})
        if mode == "unauthorized":
            return self.send(401, {"status": "failed", "error": "token is invalid", "api_version": "v2.6"})
        if mode == "error_body":
            return self.send(200, fixtures["caiyun_error"])
        try:
            steps = int(query.get("dailysteps", "5"))
        except ValueError:
            steps = 0
        if not 1 <= steps <= 15:
            return self.send(422, {"status": "failed", "error": "dailysteps must be in 1..15"})
        self.send(200, caiyun_payload(fixtures, steps, mode))

    def visualcrossing(self, segments, query):
        mode, delay = self.server.state.mode("visualcrossing")
        if self.common_failure("visualcrossing", mode, delay):
            return
        fixtures = self.server.state.fixtures
        if mode == "rate_limited":
            return self.send(429, "You have exceeded the maximum number of daily result records for your account.",
                             content_type="text/plain", headers={"Retry-After": "30"})
        if mode == "unauthorized":
            return self.send(401, "No account found with API key '<key>'", content_type="text/plain")
        if mode == "error_body":
            return self.send(200, {"errorCode": 999, "executionTime": 0, "message": "Internal error"})
        if query.get("unitGroup") != "metric":
            # The real API would answer in Fahrenheit; a fake that did so would hide the bug.
            return self.send(400, "Bad API Request: this fake only speaks unitGroup=metric", content_type="text/plain")
        start = end = None
        try:
            if len(segments) == 3:
                start, end = dt.date.fromisoformat(segments[1]), dt.date.fromisoformat(segments[2])
            elif len(segments) != 1:
                raise ValueError
        except ValueError:
            return self.send(400, "Bad API Request:Invalid date or location", content_type="text/plain")
        if start is not None and start > end:
            return self.send(400, "Bad API Request:Start date after end date", content_type="text/plain")
        self.send(200, vc_payload(fixtures, start, end, mode))


class Server(ThreadingHTTPServer):
    request_queue_size = 64  # tests open many connections at once
    daemon_threads = True  # a sleeping `slow` handler must not block shutdown
    allow_reuse_address = True


def stop_on_signals():
    """Make SIGTERM/SIGINT stop the server even when the parent left them blocked or ignored.

    Foundation's `Process` on Linux spawns children with the spawning thread's signal mask, and
    dispatch worker threads block nearly everything, so without this a test's `kill(pid, SIGTERM)`
    would never arrive.
    """
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT})

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)


def main():
    stop_on_signals()
    parent = os.getppid()  # before anything that takes time: the parent may end meanwhile
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description="Loopback fake of Caiyun and Visual Crossing (tests only).")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one")
    parser.add_argument("--port-file", help="write the bound port here once listening")
    parser.add_argument("--fixtures", default=os.path.join(here, "..", "WeatherProvidersTests", "Fixtures"),
                        help="folder with the provider fixture JSON files")
    parser.add_argument("--tls-cert", help="serve https with this certificate (PEM)")
    parser.add_argument("--tls-key", help="the certificate's private key (PEM)")
    parser.add_argument("--exit-with-parent", action="store_true",
                        help="stop when the process that started this one ends (the test runner: a test that "
                             "crashes never reaches the code that stops its servers)")
    args = parser.parse_args()

    server = Server(("127.0.0.1", args.port), Handler)
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server.state = State(load_fixtures(args.fixtures))
    port = server.server_address[1]
    if args.port_file:
        # Write then rename, so a reader never sees a half-written port.
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(port))
        os.replace(tmp, args.port_file)
    else:
        print(port, flush=True)
    if args.exit_with_parent:
        def watch_parent():
            while os.getppid() == parent:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch_parent, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
