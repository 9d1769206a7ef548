import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore

@Suite struct RequestParserTests {
    func parse(_ params: [String: String], prefix: String = "", body: [UInt8] = []) throws(HTTPError) -> Request {
        try Request.parse(params: CGIParameters(params), mountPrefix: prefix) { n in Array(body.prefix(n)) }
    }

    @Test func nginxStylePathAndQueryFromRequestURI() throws {
        let r = try parse(
            [
                "REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/weather?lat=1&lon=2&x=a%20b+c", "QUERY_STRING": "lat=1&lon=2&x=a%20b+c",
                "HTTP_X_WEATHER_TOKEN": "t", "REMOTE_ADDR": "::1",
            ], prefix: "/api")
        #expect(r.method == "GET")
        #expect(r.path == "/v1/weather")
        #expect(r.query.map(\.name) == ["lat", "lon", "x"])
        #expect(try r.queryValue("x") == "a b c")
        #expect(r.headers["x-weather-token"] == "t")
        #expect(r.remoteAddr == "::1")
    }

    /// The path ends at the URI's first `?`; the query is `QUERY_STRING` when the web server
    /// gives one, else what follows that `?` (session 29 splits on the bytes).
    @Test func theURIIsSplitAtItsFirstQuestionMark() throws {
        let both = try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/weather?lat=1", "QUERY_STRING": "lat=5&lon=6"])
        #expect(both.path == "/v1/weather" && both.query.map(\.value) == ["5", "6"])
        for (uri, path, query) in [
            ("/v1/weather?", "/v1/weather", [String]()), ("?lat=1", "", ["lat"]), ("/v1/weather?a=1?b=2", "/v1/weather", ["a"]),
            ("/v1/health", "/v1/health", []), ("/v1/w%C3%A4?x=%C3%A4", "/v1/w\u{E4}", ["x"]),
        ] {
            let r = try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": uri])
            #expect(r.path == path && r.query.map(\.name) == query, "\(uri): \(r.path) \(r.query)")
        }
        #expect(try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/weather?a=1?b=2"]).queryValue("a") == "1?b=2")
    }

    /// A mount prefix with a space or a non-ASCII letter, written as it is in the settings,
    /// matches the request's escaped path (the configuration accepts such prefixes for that).
    @Test func aPrefixWithASpaceOrNonASCIIMatchesItsEscapedPath() throws {
        for (prefix, uri) in [("/my api", "/my%20api/v1/health"), ("/wetter-\u{E4}", "/wetter-%C3%A4/v1/health")] {
            let r = try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": uri], prefix: prefix)
            #expect(r.path == "/v1/health", "\(prefix)")
        }
    }

    @Test func apacheStyleScriptNameAndPathInfo() throws {
        let r = try parse(["REQUEST_METHOD": "GET", "SCRIPT_NAME": "/api/weather.fcgi", "PATH_INFO": "/v1/health"], prefix: "/api")
        #expect(([r.path] + r.alternatePaths).contains("/v1/health"))
        var router = Router()
        struct Ok: Responder { func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response { Response(status: 200) } }
        router.add("GET", "/v1/health", Ok())
        #expect(router.resolve(r).route == "/v1/health")
    }

    /// The path's spellings in their order: REQUEST_URI's path, then SCRIPT_NAME + PATH_INFO, then
    /// PATH_INFO (the router tries them so); "/" when there is none; a bad escape in any of them is 400.
    @Test func thePathsSpellingsKeepTheirOrder() throws {
        let r = try parse([
            "REQUEST_METHOD": "GET", "REQUEST_URI": "/api/weather.fcgi/v1/health?x=1", "SCRIPT_NAME": "/api/weather.fcgi",
            "PATH_INFO": "/v1/h%65alth",
        ])
        #expect(r.path == "/api/weather.fcgi/v1/health")
        #expect(r.alternatePaths == ["/api/weather.fcgi/v1/health", "/v1/health"])
        let bare = try parse(["REQUEST_METHOD": "GET"])
        #expect(bare.path == "/" && bare.alternatePaths.isEmpty)
        let onlyURI = try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/weather?lat=1"])
        #expect(onlyURI.path == "/v1/weather" && onlyURI.alternatePaths.isEmpty)
        #expect(throws: HTTPError.self) { try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health", "PATH_INFO": "/v1/%ZZ"]) }
        #expect(throws: HTTPError.self) { try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/%C3"]) }
    }

    /// Every `HTTP_` parameter becomes a lower-case header with dashes; `CONTENT_TYPE` is the
    /// content type even when an `HTTP_CONTENT_TYPE` came too; other parameters are not headers.
    @Test func headersComeFromHTTPParametersAndContentType() throws {
        let r = try parse([
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "HTTP_X_WEATHER_SESSION_TOKEN": "wta_a",
            "HTTP_X_REQUEST_ID": "id-1", "HTTP_CONTENT_TYPE": "text/plain", "CONTENT_TYPE": "application/json",
            "HTTPS": "on", "REMOTE_ADDR": "10.0.0.1",
        ])
        #expect(r.headers["x-weather-session-token"] == "wta_a")
        #expect(r.headers["x-request-id"] == "id-1")
        #expect(r.headers["content-type"] == "application/json")
        #expect(r.headers["x-weather-token"] == nil)
        #expect(r.headers["remote-addr"] == nil)
        #expect(Array(r.headers).count == 3)
    }

    /// A field list behaves as a dictionary: set, replace (the last value wins), remove.
    @Test func fieldListSetsReplacesAndRemoves() {
        var fields: HeaderFields = ["a": "1", "bb": "2"]
        fields["a"] = "3"
        fields["c"] = "4"
        fields["bb"] = nil
        #expect(fields["a"] == "3" && fields["bb"] == nil && fields["c"] == "4")
        #expect(Array(fields).map { "\($0)=\($1)" } == ["a=3", "c=4"])
        var appended = HeaderFields()
        appended.append("x", "1")
        appended.append("x", "2")
        #expect(appended["x"] == "2")
    }

    @Test func bodyIsReadByContentLength() throws {
        let r = try parse(
            ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "CONTENT_LENGTH": "3", "CONTENT_TYPE": "application/json"], body: Array("{}xyz".utf8))
        #expect(r.body == Array("{}x".utf8))
        #expect(r.headers["content-type"] == "application/json")
    }

    @Test(arguments: [
        ["REQUEST_URI": "/v1/health"],
        ["REQUEST_METHOD": "", "REQUEST_URI": "/v1/health"],
        ["REQUEST_METHOD": "get", "REQUEST_URI": "/v1/health"],
        ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "CONTENT_LENGTH": "99999999999999999999999"],
        ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "CONTENT_LENGTH": "-1"],
        ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "CONTENT_LENGTH": "12"],
        ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/%ff"],
        ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/\u{FFFD}"],
        ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/%00"],
        ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/weather?lat=%ff"],
    ])
    func malformedParametersAre4xx(params: [String: String]) {
        #expect {
            try parse(params, body: Array("short".utf8))
        } throws: { error in
            guard let e = error as? HTTPError else { return false }
            return (400..<500).contains(e.status)
        }
    }

    @Test func oversizedBodyIs413WithoutReading() throws {
        var read = false
        #expect(throws: HTTPError.payloadTooLarge) {
            try Request.parse(params: ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "CONTENT_LENGTH": "4097"], mountPrefix: "") { _ in
                read = true; return []
            }
        }
        #expect(!read)
    }

    /// Apache's plain CGI passes a chunked body on decoded, without CONTENT_LENGTH: it is read to
    /// its end (it was left unread and the creation answered 400), and refused past the limit.
    @Test func aBodyWithoutALengthIsReadToItsEnd() throws {
        let chunked = ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x", "HTTP_TRANSFER_ENCODING": "chunked"]
        let json = Array(#"{"platform":"ios"}"#.utf8)
        #expect(try parse(chunked, body: json).body == json)
        #expect(try parse(chunked, body: [UInt8](repeating: 32, count: Request.maxBodyBytes)).body.count == Request.maxBodyBytes)
        #expect(throws: HTTPError.payloadTooLarge) { try parse(chunked, body: [UInt8](repeating: 32, count: Request.maxBodyBytes + 1)) }
        // Neither a length nor a transfer coding: no body, nothing read.
        var read = false
        let plain = try Request.parse(params: ["REQUEST_METHOD": "POST", "REQUEST_URI": "/x"], mountPrefix: "") { _ in
            read = true; return json
        }
        #expect(plain.body.isEmpty && !read)
    }

    @Test func duplicateQueryParameterIsRefused() throws {
        let r = try parse(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/weather?lat=1&lat=2"])
        #expect(throws: HTTPError.self) { try r.queryValue("lat") }
    }
}

@Suite struct ResponseHeadTests {
    /// The head written in one pass into a buffer of its exact size: the same bytes as written
    /// piece by piece before session 27, room for the body, no Content-Length on a 204.
    @Test func theHeadIsExactlyItsBytesWithRoomForTheBody() {
        let body = Array(#"{"ok":true}"#.utf8)
        let r = Response(status: 201, headers: [("Content-Type", "application/json; charset=utf-8"), ("X-Note", "Grüße, 雨")], body: body)
        let expected = "Status: 201 Created\r\nContent-Type: application/json; charset=utf-8\r\nX-Note: Grüße, 雨\r\nContent-Length: 11\r\n\r\n"
        #expect(r.cgiHead() == Array(expected.utf8))
        let whole = r.cgiBytes()
        #expect(whole == Array(expected.utf8) + body)
        // The body goes into room the head left for it, not into a second allocation.
        #expect(r.cgiHead(reserving: body.count).capacity >= expected.utf8.count + body.count)
        #expect(r.cgiBytes(includeBody: false) == Array(expected.utf8))
        #expect(Response(status: 204, headers: [("X-Request-Id", "r1")]).cgiHead() == Array("Status: 204 No Content\r\nX-Request-Id: r1\r\n\r\n".utf8))
        #expect(Response(status: 599).cgiHead() == Array("Status: 599 Status\r\nContent-Length: 0\r\n\r\n".utf8))
        for n in [0, 7, 9, 10, 99, 100, 4096, 1_234_567, Int.max, -1, -42, Int.min] {
            #expect(ByteWriter.decimalCount(n) == String(n).utf8.count, "\(n)")
            let written = [UInt8](unsafeUninitializedCapacity: 21) { buffer, count in
                var w = ByteWriter(buffer)
                w.write(decimal: n)
                count = w.count
            }
            #expect(written == Array(String(n).utf8), "\(n)")
        }
    }
}

/// What session 29 made once or wrote in one pass: the same texts and bytes as before.
@Suite struct OncePerWorkerTests {
    /// The header names of the kept `HTTP_` parameters, made once, are the ones every other
    /// `HTTP_` name gets on each request; names of either kind end up among the headers alike.
    @Test func theKeptHeaderNamesAreMadeAsAnyOtherIs() throws {
        let kept = Request.parameterNames.filter { $0.hasPrefix("HTTP_") }
        #expect(Request.knownHeaderNames.map(\.cgi) == kept)
        for known in Request.knownHeaderNames { #expect(known.header == headerName(cgiName: known.cgi)) }
        #expect(Request.knownHeaderName("HTTP_X_WEATHER_TOKEN") == "x-weather-token")
        #expect(Request.knownHeaderName("HTTP_X_WEATHER_TOKEX") == nil && Request.knownHeaderName("HTTP_X_CUSTOM") == nil)
        let r = try Request.parse(
            params: [
                "REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health", "HTTP_X_WEATHER_TOKEN": "a", "HTTP_X_CUSTOM_THING": "b",
                "HTTP_X_REQUEST_ID": "c", "HOST_NAME": "d", "HTTP_": "e",
            ], mountPrefix: ""
        ) { _ in [] }
        #expect(r.headers["x-weather-token"] == "a" && r.headers["x-custom-thing"] == "b" && r.headers["x-request-id"] == "c")
        #expect(r.headers[""] == "e" && r.headers["host-name"] == nil && r.headers["st-name"] == nil)
    }

    /// A log line handed over as bytes is the line as text.
    @Test func aLineWrittenAsBytesIsItsText() {
        var line = LogLine()
        line.addPlain("ts", "2026-11-30T02:00:00Z")
        line.add("storage_error", "disk \"full\" = bad\u{1}, 雨")
        let log = MemoryLog()
        line.write(to: log)
        #expect(log.lines == [line.text])
        #expect(line.text == #"ts=2026-11-30T02:00:00Z storage_error="disk \"full\" = bad?, 雨""#)
    }

    /// A line past its first 512 bytes grows and keeps every byte, in order.
    @Test func aLineLongerThanItsFirstBufferIsWhole() {
        var line = LogLine()
        var expected: [String] = []
        for i in 0..<40 {
            let value = String(repeating: Character(UnicodeScalar(UInt8(97 + i % 26))), count: 1 + i * 7)
            line.addPlain("k\(i)", value)
            expected.append("k\(i)=\(value)")
            if i % 9 == 0 {
                line.add("q\(i)", "雨 \"x\" \(i)")
                expected.append(#"q\#(i)="雨 \"x\" \#(i)""#)
            }
        }
        let log = MemoryLog()
        line.write(to: log)
        #expect(line.text == expected.joined(separator: " "))
        #expect(line.text.utf8.count > 5_000 && log.lines == [line.text])
        // One piece larger than the whole first buffer.
        var big = LogLine()
        let value = String(repeating: "x", count: 2_000)
        big.addPlain("a", "b")
        big.addPlain("big", value)
        big.addPlain("c", "d")
        #expect(big.text == "a=b big=\(value) c=d")
    }

    /// Each line's `ts` is the second it was written in, made once for that second.
    @Test func eachLineHasTheSecondItWasWrittenIn() throws {
        let t = try TestGateway()
        _ = t.send("GET", "/v1/health")
        _ = t.send("GET", "/v1/health")
        t.clock.advance(1)
        _ = t.send("GET", "/v1/health")
        t.clock.advance(86_399)
        _ = t.send("GET", "/v1/health")
        let stamps = t.log.lines.filter { $0.contains(" route=/v1/health ") }.map { $0.prefix(23) }
        #expect(stamps == ["ts=2026-11-30T02:00:00Z", "ts=2026-11-30T02:00:00Z", "ts=2026-11-30T02:00:01Z", "ts=2026-12-01T02:00:00Z"])
    }

    /// The weather envelope, written into a buffer of its exact size: the bytes appending gave.
    @Test func theEnvelopeIsTheBytesAppendingGave() {
        func before(_ report: [UInt8], _ mode: AuthMode, _ cache: String) -> [UInt8] {
            var out = Array(#"{"authMode":""#.utf8) + Array(mode.rawValue.utf8) + Array(#"","#.utf8)
            if report.count >= 2 { out += report[1..<(report.count - 1)] }
            return out + Array(#","cache":""#.utf8) + Array(cache.utf8) + Array(#""}"#.utf8)
        }
        for report in ["", "{", "{}", #"{"provider":"caiyun","daily":[1,2]}"#, "{\"note\":\"雨\"}"] {
            for mode in [AuthMode.weatherSession, .weatherToken] {
                for cache in ["hit", "miss", "stale", ""] {
                    let got = WeatherHandler.envelope(Array(report.utf8), authMode: mode, cache: cache)
                    #expect(got == before(Array(report.utf8), mode, cache), "\(report) \(mode) \(cache)")
                }
            }
        }
    }
}

/// The log line's `duration_ms`, written as digits: the text the string it replaced gave.
@Suite struct LogLineDurationTests {
    @Test func millisecondsHaveThreeDecimals() {
        for (us, text) in [(0, "0.000"), (5, "0.005"), (42, "0.042"), (999, "0.999"), (1000, "1.000"), (12_345, "12.345"), (1_234_567_890, "1234567.890")] {
            var line = LogLine()
            line.addPlain("route", "/v1/health")
            line.addMilliseconds("duration_ms", microseconds: UInt64(us))
            #expect(line.text == "route=/v1/health duration_ms=\(text)", "\(us)")
        }
    }
}

/// The check for NUL and U+FFFD finds them exactly where the byte-state machine it replaced did
/// (session 28), over strings made of the bytes that matter.
@Suite struct NULOrReplacementTests {
    static func before(_ text: String, replacementToo: Bool) -> Bool {
        var run = 0
        for c in text.utf8 {
            if c == 0 { return true }
            guard replacementToo else { continue }
            switch (run, c) {
            case (_, 0xEF): run = 1
            case (1, 0xBF): run = 2
            case (2, 0xBD): return true
            default: run = 0
            }
        }
        return false
    }

    @Test func findsWhatTheStateMachineFound() {
        var samples = ["", "/v1/weather", "a\u{0}b", "\u{FFFD}", "x\u{FFFD}", "雨\u{FFFD}雨", "﾿", "\u{FEFF}", "\u{EFBF}"]
        let pieces: [[UInt8]] = [[0xEF], [0xBF], [0xBD], [0xEF, 0xBF], [0xEF, 0xBF, 0xBD], [0], [0x61], [0xE9, 0x9B, 0xA8]]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<3000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int.random(in: 0...6, using: &rng) { bytes += pieces.randomElement(using: &rng)! }
            samples.append(String(decoding: bytes, as: UTF8.self))
        }
        var found = 0
        for text in samples {
            for replacementToo in [true, false] {
                let expected = Self.before(text, replacementToo: replacementToo)
                #expect(Request.hasNULOrReplacement(text, replacementToo: replacementToo) == expected, "\(Array(text.utf8)) \(replacementToo)")
                if expected { found += 1 }
            }
        }
        #expect(found > 1000)
    }
}

/// Per-hour counters: each name summed within its hour, hours kept apart, nothing left after a drain.
@Suite struct CountersTests {
    @Test func namesAreSummedWithinTheirHour() {
        var c = Counters()
        let t = Timestamp(seconds: 1_764_720_000)  // 2025-12-03T00:00:00Z
        for name in ["auth.weather_session", "cache.hit", "auth.weather_session", "status.429", "cache.hit", "auth.weather_session"] {
            c.add(name, at: t)
        }
        c.add("cache.hit", at: Timestamp(seconds: t.seconds + 59 * 60), 5)
        c.add("cache.hit", at: Timestamp(seconds: t.seconds + 3600))
        let h0 = CounterKey.hour(of: t), h1 = CounterKey.hour(of: Timestamp(seconds: t.seconds + 3600))
        let expected: [CounterKey: Int64] = [
            CounterKey(hour: h0, name: "auth.weather_session"): 3, CounterKey(hour: h0, name: "cache.hit"): 7,
            CounterKey(hour: h0, name: "status.429"): 1, CounterKey(hour: h1, name: "cache.hit"): 1,
        ]
        #expect(c.pending == expected)
        #expect(c.drain() == expected)
        #expect(c.pending.isEmpty)
        c.add("cache.hit", at: Timestamp(seconds: t.seconds + 3601))
        #expect(c.drain() == [CounterKey(hour: h1, name: "cache.hit"): 1])
    }
}

/// The short list of parameters and headers: a name given twice reads as its last value, a value
/// set again replaces it in place, nil removes it, and iteration keeps the order given.
@Suite struct FieldListTests {
    @Test func lastOneWinsAndOrderIsKept() {
        var list = FieldList()
        list.append("REQUEST_METHOD", "GET")
        list.append("HTTP_X_A", "1")
        list.append("HTTP_X_A", "2")
        list.append("REQUEST_URI", "/v1/health")
        #expect(list["HTTP_X_A"] == "2")
        #expect(list["HTTP_X_B"] == nil)
        #expect(list["REQUEST_METHO"] == nil)
        list["REQUEST_METHOD"] = "POST"
        #expect(Array(list).map { "\($0.0)=\($0.1)" } == ["REQUEST_METHOD=POST", "HTTP_X_A=1", "HTTP_X_A=2", "REQUEST_URI=/v1/health"])
        list["HTTP_X_A"] = nil
        #expect(list["HTTP_X_A"] == "1")
        list["HTTP_X_A"] = nil
        #expect(list["HTTP_X_A"] == nil)
        list["CONTENT_TYPE"] = "application/json"
        #expect(Array(list).map(\.0) == ["REQUEST_METHOD", "REQUEST_URI", "CONTENT_TYPE"])
        let literal: FieldList = ["content-type": "text/plain", "x-request-id": "r1"]
        #expect(literal["x-request-id"] == "r1" && literal["content-type"] == "text/plain")
    }
}

@Suite struct OpenAPIDocumentTests {
    @Test func servedDocumentEqualsDocsOpenAPIJSON() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let onDisk = try String(contentsOf: root.appendingPathComponent("docs/openapi.json"), encoding: .utf8)
        #expect(onDisk.trimmingCharacters(in: .newlines) == openAPIDocument.trimmingCharacters(in: .newlines), "run scripts/embed.sh")
        let t = try TestGateway()
        let a = t.send("GET", "/openapi.json")
        #expect(a.status == 200)
        #expect((a.json["openapi"] as? String)?.hasPrefix("3.1") == true)
    }
}

/// `WeatherParameters.plainDecimal` reads coordinates in one pass; it must accept exactly what
/// the rule it replaced accepted, with the same `Double`, bit for bit.
@Suite struct PlainDecimalTests {
    /// The rule before: sign, digits and one inner dot, at most 24 bytes, then `Double(text)`.
    static func before(_ text: String) -> Double? {
        let u = Array(text.utf8)
        let digits = u.drop { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") }
        guard u.count <= 24, u.count - digits.count <= 1, !digits.isEmpty,
            digits.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".") }),
            digits.filter({ $0 == UInt8(ascii: ".") }).count <= 1,
            digits.first != UInt8(ascii: "."), digits.last != UInt8(ascii: "."),
            let v = Double(text), v.isFinite
        else { return nil }
        return v
    }

    @Test func acceptsWhatTheOldRuleAcceptedWithTheSameValue() {
        var cases = [
            "", "-", "+", ".", "0", "-0", "+0", "00", "1.5", "-1.5", "+31.2304", ".5", "5.", "1..2", "1.2.3", "--1", "+-1",
            "1e5", "0x1p3", "nan", "inf", " 1", "1 ", "31.230400000000000000001", "123456789012345.6", "0.1234567890123456",
            "9999999999999999", "121.4737", "-180", "90.000000", String(repeating: "9", count: 24), String(repeating: "9", count: 25),
        ]
        let alphabet = Array("0123456789.-+e".utf8)
        var random = SystemRandomNumberGenerator()
        for _ in 0..<50_000 {
            let n = Int.random(in: 1...26, using: &random)
            cases.append(
                String(
                    decoding: (0..<n).map { i in
                        i == 0 || Int.random(in: 0..<8, using: &random) == 0
                            ? alphabet.randomElement(using: &random)! : UInt8.random(in: 48...57, using: &random)
                    }, as: UTF8.self))
        }
        for text in cases {
            let mine = WeatherParameters.plainDecimal(text), theirs = Self.before(text)
            #expect(mine?.bitPattern == theirs?.bitPattern, "\(text): \(String(describing: mine)) vs \(String(describing: theirs))")
        }
    }
}

/// The worker's log sink writes each line and its newline in one `writev` to standard error, so
/// lines of processes (here threads) sharing it never interleave (up to PIPE_BUF, 4096 bytes).
@Suite struct StandardErrorLogTests {
    @Test func eachLineArrivesWholeWithItsNewline() throws {
        // A pipe of its own (close-on-exec: no server a parallel test starts may hold it open),
        // drained while written: 8 × 200 lines are more than a pipe holds.
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let reader = fds[0]
        let collected = LockedBytes()
        let drained = DispatchSemaphore(value: 0)
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = buffer.withUnsafeMutableBytes { read(reader, $0.baseAddress, 65536) }
                if n <= 0 { break }
                collected.append(buffer[0..<n])
            }
            drained.signal()
        }.start()
        let log = StandardErrorLog(fd: fds[1])
        // Line i of writer w: its name, then a filler of a length that varies up to 3,000 bytes.
        @Sendable func line(_ w: Int, _ i: Int) -> String {
            "writer=\(w) line=\(i) " + String(repeating: Character(UnicodeScalar(UInt8(97 + (w + i) % 8))), count: (w * 389 + i * 97) % 3000)
        }
        // Eight threads at once (`concurrentPerform` would run one per core).
        let done = DispatchGroup()
        for w in 0..<8 {
            done.enter()
            Thread {
                // Odd writers hand their lines over as bytes (`LogLine.write(to:)`'s way).
                for i in 0..<200 {
                    if w % 2 == 1 {
                        var text = line(w, i)
                        text.withUTF8 { log.write(utf8: $0) }
                    } else {
                        log.write(line(w, i))
                    }
                }
                done.leave()
            }.start()
        }
        done.wait()
        log.write("")
        close(fds[1])
        drained.wait()
        close(fds[0])
        let lines = Set(String(decoding: collected.bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false))
        let missing = (0..<8).flatMap { w in (0..<200).filter { i in !lines.contains(Substring(line(w, i))) }.map { "\(w)/\($0)" } }
        #expect(missing.count == 0, "lines not whole, of 1,600: \(missing.prefix(5))")
        #expect(lines.contains(""))
    }
}

final class LockedBytes: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [UInt8] = []
    func append(_ more: ArraySlice<UInt8>) { lock.lock(); storage += more; lock.unlock() }
    var bytes: [UInt8] { lock.lock(); defer { lock.unlock() }; return storage }
}
