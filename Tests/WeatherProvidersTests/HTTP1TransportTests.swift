import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
import WeatherCore
import WeatherProviders

/// The HTTP/1.1 client against the python fake on loopback: real sockets, real HTTP, no internet.
@Suite struct HTTP1TransportTests {
    /// Short, so the timeout test costs half a second.
    static let timeout = 0.5

    /// Runs `body` with a fresh fake server, stopped by pid whatever happens.
    func withServer(_ body: (FakeProviderServer, HTTP1Transport) throws -> Void) throws {
        let server = try FakeProviderServer()
        defer { server.stop() }
        try body(server, HTTP1Transport())
    }

    func caiyun(_ server: FakeProviderServer, _ transport: HTTP1Transport, timeout: Double = 5) -> CaiyunProvider {
        CaiyunProvider(baseURL: server.baseURL, token: "fake-token", transport: transport, timeoutSeconds: timeout)
    }

    func visualCrossing(_ server: FakeProviderServer, _ transport: HTTP1Transport, timeout: Double = 5) -> VisualCrossingProvider {
        VisualCrossingProvider(baseURL: server.baseURL, apiKey: "fake-key", transport: transport, timeoutSeconds: timeout)
    }

    /// The fake dates its answers from the real clock, so these tests use it too.
    static var realNow: Timestamp { Timestamp(seconds: Int64(Date().timeIntervalSince1970)) }

    @Test func caiyunForecastRoundTripsAndIsRecordedLongitudeFirst() throws {
        try withServer { server, transport in
            let report = try caiyun(server, transport).fetch(.forecast(days: 7), at: shanghai, now: Self.realNow)
            #expect(report.daily.count == 7)
            #expect(report.current?.condition == .cloudy)
            #expect(report.current?.humidity == 0.62)
            #expect(report.timezone == "Asia/Shanghai")
            let calls = try server.calls()
            #expect(calls.count == 1)
            #expect(calls.first?["provider"] as? String == "caiyun")
            #expect(calls.first?["path"] as? String == "/v2.6/<key>/121.5,31.3/weather")
            let query = calls.first?["query"] as? [String: String]
            #expect(query == ["unit": "metric:v2", "dailysteps": "7", "hourlysteps": "1"])
        }
    }

    @Test func visualCrossingForecastAndTripRoundTrip() throws {
        try withServer { server, transport in
            let now = Self.realNow
            let provider = visualCrossing(server, transport)
            let forecast = try provider.fetch(.forecast(days: 15), at: newYork, now: now)
            #expect(forecast.daily.count == 15)
            #expect(forecast.daily.first?.date == now.utcDate.description)
            #expect(forecast.current?.humidity == 0.725)
            let start = now.utcDate.adding(days: 20)
            let trip = try provider.fetch(.trip(start: start, end: start.adding(days: 4)), at: newYork, now: now)
            #expect(trip.current == nil)
            #expect(trip.daily.map(\.date) == (0..<5).map { start.adding(days: $0).description })
            #expect(trip.daily.last?.precipitationProbability == nil)
            let calls = try server.calls()
            #expect(
                calls.map { $0["path"] as? String } == [
                    "/VisualCrossingWebServices/rest/services/timeline/40.7,-74",
                    "/VisualCrossingWebServices/rest/services/timeline/40.7,-74/\(start)/\(start.adding(days: 4))",
                ])
            #expect((calls[0]["query"] as? [String: String])?["key"] == "<key>")
            #expect((calls[0]["query"] as? [String: String])?["unitGroup"] == "metric")
        }
    }

    @Test(arguments: ["integers", "missing_optional", "extra_fields"])
    func payloadVariationsFromTheFakeStillNormalise(mode: String) throws {
        try withServer { server, transport in
            try server.setMode("caiyun", mode)
            try server.setMode("visualcrossing", mode)
            let c = try caiyun(server, transport).fetch(.forecast(days: 5), at: shanghai, now: Self.realNow)
            let v = try visualCrossing(server, transport).fetch(.forecast(days: 5), at: newYork, now: Self.realNow)
            #expect(c.daily.count == 5 && v.daily.count == 5)
            #expect(c.current != nil && v.current != nil)
            if mode == "missing_optional" {
                #expect(c.current?.apparentTemperatureC == nil)
                #expect(c.daily[1].precipitationProbability == nil)
                #expect(v.current?.apparentTemperatureC == nil)
                #expect(v.daily[1].precipitationProbability == nil)
            }
        }
    }

    @Test func rateLimitCarriesRetryAfter() throws {
        try withServer { server, transport in
            try server.setMode("caiyun", "rate_limited")
            try server.setMode("visualcrossing", "rate_limited")
            let raw = try transport.get("\(server.baseURL)/v2.6/t/121.5,31.3/weather?dailysteps=1", timeoutSeconds: 5)
            #expect(raw.status == 429)
            #expect(raw.retryAfterSeconds == 30)
            #expect(throws: ProviderFailure.httpStatus(429, retryAfter: 30)) {
                try caiyun(server, transport).fetch(.forecast(days: 7), at: shanghai, now: Self.realNow)
            }
            #expect(throws: ProviderFailure.httpStatus(429, retryAfter: 30)) {
                try visualCrossing(server, transport).fetch(.forecast(days: 7), at: newYork, now: Self.realNow)
            }
            // Retry-After belongs to the response that sent it, not to the next one.
            let ok = try transport.get("\(server.baseURL)/_calls", timeoutSeconds: 5)
            #expect(ok.status == 200 && ok.retryAfterSeconds == nil)
        }
    }

    @Test(arguments: [
        ("unauthorized", ProviderFailure.httpStatus(401, retryAfter: nil), ProviderFailure.httpStatus(401, retryAfter: nil)),
        ("html_error", .httpStatus(502, retryAfter: nil), .httpStatus(502, retryAfter: nil)),
        ("error_body", .providerError, .providerError),
        ("garbage", .notJSON, .notJSON),
        ("short", .notCovered, .notCovered),
        // An error page whose gzip body does not inflate is still its status (it was
        // `unparseable`, which pauses nothing).
        ("broken_gzip_503", .httpStatus(503, retryAfter: nil), .httpStatus(503, retryAfter: nil)),
    ])
    func errorModesAreClassified(mode: String, caiyunFailure: ProviderFailure, vcFailure: ProviderFailure) throws {
        try withServer { server, transport in
            try server.setMode("caiyun", mode)
            try server.setMode("visualcrossing", mode)
            // 15 days: the most both providers return, so `short` is one day short for both.
            #expect(throws: caiyunFailure) { try caiyun(server, transport).fetch(.forecast(days: 15), at: shanghai, now: Self.realNow) }
            #expect(throws: vcFailure) { try visualCrossing(server, transport).fetch(.forecast(days: 15), at: newYork, now: Self.realNow) }
        }
    }

    @Test func slowProviderTimesOutOnTimeAndTheHandleRecovers() throws {
        try withServer { server, transport in
            try server.setMode("caiyun", "slow", delay: 5)
            let provider = caiyun(server, transport, timeout: Self.timeout)
            let clock = ContinuousClock()
            let started = clock.now
            let cpuBefore = Self.threadCPUSeconds()
            #expect(throws: ProviderFailure.timeout) { try provider.fetch(.forecast(days: 7), at: shanghai, now: Self.realNow) }
            #expect(clock.now - started < .seconds(Self.timeout + 1))
            // The wait sleeps in poll(2): a worker waiting for a provider must not spin a core.
            #expect(Self.threadCPUSeconds() - cpuBefore < Self.timeout / 2)
            // The same transport serves the next call normally.
            try server.setMode("caiyun", "ok")
            #expect(try provider.fetch(.forecast(days: 2), at: shanghai, now: Self.realNow).daily.count == 2)
        }
    }

    /// A provider that keeps the socket readable without ever finishing its answer (endless
    /// interim responses, trailers, or chunk extensions that add a byte of body per 4 KB) is cut
    /// off by the caps, or at the latest by the deadline: it used to hold the worker as long as
    /// it kept sending (the deadline was looked at only when a read would have waited).
    @Test(arguments: ["flood_interim", "flood_trailer", "flood_extension"])
    func aProviderThatNeverStopsSendingIsCutOffInTime(mode: String) throws {
        try withServer { server, transport in
            try server.setMode("caiyun", mode, delay: 20)
            let provider = caiyun(server, transport, timeout: Self.timeout)
            let clock = ContinuousClock()
            let started = clock.now
            #expect(throws: ProviderFailure.self) { try provider.fetch(.forecast(days: 7), at: shanghai, now: Self.realNow) }
            #expect(clock.now - started < .seconds(Self.timeout + 1))
            try server.setMode("caiyun", "ok")
            #expect(try provider.fetch(.forecast(days: 1), at: shanghai, now: Self.realNow).daily.count == 1)
        }
    }

    /// CPU time (user + system) of the calling thread so far.
    static func threadCPUSeconds() -> Double {
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) + Double(t.tv_nsec) / 1_000_000_000
    }

    @Test func resetConnectionIsATransportFailure() throws {
        try withServer { server, transport in
            try server.setMode("caiyun", "reset")
            let provider = caiyun(server, transport)
            #expect(throws: ProviderFailure.transport) { try provider.fetch(.forecast(days: 7), at: shanghai, now: Self.realNow) }
            try server.setMode("caiyun", "ok")
            #expect(try provider.fetch(.forecast(days: 1), at: shanghai, now: Self.realNow).daily.count == 1)
        }
    }

    @Test func keepAliveReusesTheConnection() throws {
        try withServer { server, transport throws in
            let provider = caiyun(server, transport)
            for days in 1...5 {
                #expect(try provider.fetch(.forecast(days: days), at: shanghai, now: Self.realNow).daily.count == days)
            }
            #expect(try server.calls().count == 5)
            // One connection for the five calls, one for `calls()` and one for this question.
            #expect(try server.connections() == 3)
        }
    }

    @Test func oversizedBodyIsUnparseable() throws {
        try withServer { server, _ in
            let small = HTTP1Transport(maxBodyBytes: 1024)
            #expect(throws: ProviderFailure.unparseable) {
                try small.get("\(server.baseURL)/v2.6/t/121.5,31.3/weather?dailysteps=15", timeoutSeconds: 5)
            }
        }
    }

    @Test func nothingListeningIsATransportFailureWithoutTheURL() throws {
        // Bind, read the port, close: nothing listens there afterwards.
        let server = try FakeProviderServer()
        let port = server.port
        server.stop()
        let transport = HTTP1Transport()
        do {
            _ = try transport.get("http://127.0.0.1:\(port)/v2.6/secret-token/1,2/weather", timeoutSeconds: 2)
            Issue.record("expected a failure")
        } catch {
            #expect(error == .transport)
            #expect(!"\(error)".contains("secret") && !error.summary.contains("secret"))
        }
    }

    @Test func otherSchemesAreRefused() throws {
        let transport = HTTP1Transport()
        #expect(throws: ProviderFailure.transport) { try transport.get("file:///etc/passwd", timeoutSeconds: 1) }
    }

    @Test(arguments: ["chunked", "gzip", "until_close"])
    func everyBodyFramingDecodes(mode: String) throws {
        try withServer { server, transport in
            try server.setMode("caiyun", mode)
            try server.setMode("visualcrossing", mode)
            for days in [7, 15] {
                #expect(try caiyun(server, transport).fetch(.forecast(days: days), at: shanghai, now: Self.realNow).daily.count == days)
                #expect(try visualCrossing(server, transport).fetch(.forecast(days: days), at: newYork, now: Self.realNow).daily.count == days)
            }
            #expect(try server.calls().count == 4)
        }
    }

    @Test func gzipBodiesAreCappedAfterDecompression() throws {
        try withServer { server, _ in
            try server.setMode("caiyun", "gzip")
            // 15 days compress well below 4 KiB but inflate far beyond it.
            let small = HTTP1Transport(maxBodyBytes: 4096)
            #expect(throws: ProviderFailure.unparseable) {
                try small.get("\(server.baseURL)/v2.6/t/121.5,31.3/weather?dailysteps=15", timeoutSeconds: 5)
            }
        }
    }

    @Test func aConnectionTheProviderClosedSilentlyIsReplaced() throws {
        try withServer { server, transport in
            try server.setMode("caiyun", "close_after")
            let provider = caiyun(server, transport)
            for days in 1...4 {
                #expect(try provider.fetch(.forecast(days: days), at: shanghai, now: Self.realNow).daily.count == days)
            }
            #expect(try server.calls().count == 4)
            // setMode, one per call, calls() and this question.
            #expect(try server.connections() == 1 + 4 + 2)
        }
    }

    @Test func hostNamesAreResolved() throws {
        try withServer { server, transport in
            // localhost may resolve to ::1 first, where nothing listens: the next address serves.
            let result = try transport.get("http://localhost:\(server.port)/_calls", timeoutSeconds: 5)
            #expect(result.status == 200)
        }
    }

    @Test func httpsWithATrustedCertificateRoundTripsOnOneConnection() throws {
        let certificate = try TestCertificate(subjectAltName: "IP:127.0.0.1")
        defer { certificate.remove() }
        let server = try FakeProviderServer(certificate: (certificate.cert, certificate.key))
        defer { server.stop() }
        let transport = HTTP1Transport(caFile: certificate.cert)
        let provider = caiyun(server, transport)
        for days in [3, 5] {
            #expect(try provider.fetch(.forecast(days: days), at: shanghai, now: Self.realNow).daily.count == days)
        }
        #expect(try server.calls().count == 2)
        #expect(try server.connections() == 1 + 2)
    }

    @Test func httpsRefusesAnUntrustedCertificate() throws {
        let certificate = try TestCertificate(subjectAltName: "IP:127.0.0.1")
        defer { certificate.remove() }
        let server = try FakeProviderServer(certificate: (certificate.cert, certificate.key))
        defer { server.stop() }
        // The system's authorities have never heard of this self-signed certificate.
        #expect(throws: ProviderFailure.tls) { try HTTP1Transport().get("\(server.baseURL)/_calls", timeoutSeconds: 5) }
        #expect(try server.calls().isEmpty)
    }

    @Test func httpsRefusesACertificateForAnotherName() throws {
        let certificate = try TestCertificate(subjectAltName: "DNS:weather.example")
        defer { certificate.remove() }
        let server = try FakeProviderServer(certificate: (certificate.cert, certificate.key))
        defer { server.stop() }
        // Trusted, but issued for weather.example, not for 127.0.0.1.
        #expect(throws: ProviderFailure.tls) {
            try HTTP1Transport(caFile: certificate.cert).get("\(server.baseURL)/_calls", timeoutSeconds: 5)
        }
    }
}

/// A throw-away self-signed certificate made with the `openssl` command for one test: no key is
/// ever committed as a fixture.
struct TestCertificate {
    struct Failure: Error {}
    let folder: String
    var cert: String { folder + "/cert.pem" }
    var key: String { folder + "/key.pem" }

    init(subjectAltName: String) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "1", "-subj", "/CN=closet-weather-test", "-addext", "subjectAltName=\(subjectAltName)",
            "-keyout", folder + "/key.pem", "-out", folder + "/cert.pem",
        ]
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure() }
    }

    func remove() { try? FileManager.default.removeItem(atPath: folder) }
}
