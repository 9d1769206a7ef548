import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The weather routes through nginx to 2+ workers, against loopback fake providers.
@Suite(.serialized) struct WeatherEndToEndTests {
    /// The date `offset` days from now in Shanghai: the fake Caiyun's days.
    static func shanghaiDay(_ offset: Int) -> String {
        let f = DateFormatter()
        f.dateFormat = "yyyy-MM-dd"
        f.timeZone = TimeZone(identifier: "Asia/Shanghai")
        return f.string(from: Date().addingTimeInterval(Double(offset) * 86400))
    }

    func session(_ h: GatewayHarness) throws -> [String: String] {
        ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
    }

    @Test func caiyunSeesOnlySnappedCoordinatesLongitudeFirst() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment())
        h.companions.append(fake)
        let r = try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737&days=3", headers: try session(h))
        #expect(r.status == 200, "\(r.text)")
        #expect(r.json["provider"] as? String == "caiyun")
        #expect(r.json["cache"] as? String == "miss")
        #expect((r.json["daily"] as? [Any])?.count == 3)
        let loc = try #require(r.json["location"] as? [String: Double])
        #expect(loc == ["lat": 31.25, "lon": 121.45])
        let calls = try fake.calls()
        #expect(calls.count == 1)
        let path = try #require(calls.first?["path"] as? String)
        #expect(path.hasSuffix("/121.45,31.25/weather"), "\(path)")
        #expect(!path.contains("31.2304") && !path.contains("121.4737"))
        #expect(!h.log.contains("31.2304") && !h.log.contains("121.4737"))
        #expect(h.sql("SELECT group_concat(cache_key) FROM weather_cache") == "31.25,121.45|forecast")
    }

    /// A provider named by host name, as in production, is reached: the worker resolves it on its
    /// resolver thread (every other end-to-end test names the fake by address, which resolves
    /// without one), so `make sanitize` sees that thread in a real worker too.
    @Test func aProviderNamedByHostNameIsReached() throws {
        let fake = try FakeProviders()
        var env = fake.environment(providers: "caiyun")
        env["CAIYUN_BASE_URL"] = "http://localhost:\(fake.port)"
        let h = try GatewayHarness(workers: 1, env: env)
        h.companions.append(fake)
        let r = try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737", headers: try session(h))
        #expect(r.status == 200, "\(r.text)")
        #expect(r.json["provider"] as? String == "caiyun")
        #expect(try fake.calls().count == 1)
        #expect(h.log.contains("providers=caiyun:ok"), "\(h.log)")
        // One process, no supervisor: it says its release once, at start (session 27).
        #expect(h.log.components(separatedBy: "weather-fcgi: version dev, serving (pid ").count == 2, "\(h.log)")
    }

    @Test func secondRequestInCellIsAHitAndSixteenConcurrentMissesMakeOneCall() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment())
        h.companions.append(fake)
        let auth = try session(h)
        #expect(try h.request("GET", "/v1/weather?lat=10.01&lon=20.01", headers: auth).json["cache"] as? String == "miss")
        let hit = try h.request("GET", "/v1/weather?lat=9.99&lon=19.98", headers: auth)
        #expect(hit.json["cache"] as? String == "hit")
        #expect(try fake.calls().count == 1)

        try fake.reset()
        try fake.setMode("caiyun", "slow", delay: 0.3)  // hold the first fetch so the others pile up
        let burst = concurrently(16, port: h.port, "GET", "/v1/weather?lat=40.0&lon=116.4", headers: auth)
        let answers = burst.answers
        #expect(burst.overlapped, "the 16 requests went one after another: nothing to coalesce")
        #expect(answers.count == 16)
        #expect(answers.allSatisfy { $0.status == 200 }, "\(answers.map(\.status))")
        #expect(try fake.calls().count == 1)
        #expect(answers.filter { $0.json["cache"] as? String == "miss" }.count == 1)
    }

    @Test func failoverStaleAndErrors() throws {
        let fake = try FakeProviders()
        var env = fake.environment(timeout: "1")
        env["WEATHER_CACHE_TTL"] = "1"
        let h = try GatewayHarness(workers: 2, env: env)
        h.companions.append(fake)
        let auth = try session(h)

        try fake.setMode("caiyun", "html_error")
        let failover = try h.request("GET", "/v1/weather?lat=1&lon=1", headers: auth)
        #expect(failover.status == 200)
        #expect(failover.json["provider"] as? String == "visualcrossing")

        try h.advanceClock(by: 1)  // the 1 s cache TTL passes
        try fake.setMode("visualcrossing", "rate_limited")
        let stale = try h.request("GET", "/v1/weather?lat=1&lon=1", headers: auth)
        #expect(stale.status == 200)
        #expect(stale.json["cache"] as? String == "stale")
        #expect(stale.json["provider"] as? String == "visualcrossing")

        let started = Date()
        let nothing = try h.request("GET", "/v1/weather?lat=5&lon=5", headers: auth)
        #expect(nothing.status == 502)
        #expect(nothing.errorCode == "provider_error")
        #expect(Date().timeIntervalSince(started) < 2.5)
        #expect(!nothing.text.contains("fake-caiyun-token") && !nothing.text.contains("html"))
    }

    @Test func slowProviderIs504AndTheWorkerIsFreeRightAfter() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 1, env: fake.environment(providers: "caiyun", timeout: "1"))
        h.companions.append(fake)
        let auth = try session(h)
        try fake.setMode("caiyun", "slow", delay: 5)
        let started = Date()
        let slow = try h.request("GET", "/v1/weather?lat=2&lon=2", headers: auth)
        let took = Date().timeIntervalSince(started)
        #expect(slow.status == 504)
        #expect(slow.errorCode == "provider_timeout")
        #expect(took < 2.0, "took \(took) s")
        // One worker only: if it were still stuck, this would wait for the provider's 5 s.
        let healthStarted = Date()
        #expect(try h.request("GET", "/v1/health").status == 200)
        // (A stuck worker would take about 4 s; the bound leaves room for a loaded machine.)
        #expect(Date().timeIntervalSince(healthStarted) < 3.0)
    }

    @Test func tripBeyondCaiyunHorizonGoesToVisualCrossing() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment())
        h.companions.append(fake)
        let auth = try session(h)
        func day(_ offset: Int) -> String {
            let f = DateFormatter()
            f.dateFormat = "yyyy-MM-dd"
            f.timeZone = TimeZone(identifier: "UTC")
            return f.string(from: Date().addingTimeInterval(Double(offset) * 86400))
        }
        let far = try h.request("GET", "/v1/weather/trip?lat=48.85&lon=2.35&start=\(day(40))&end=\(day(44))", headers: auth)
        #expect(far.status == 200, "\(far.text)")
        #expect(far.json["provider"] as? String == "visualcrossing")
        #expect(far.json["current"] == nil)
        let dates = (far.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String }
        #expect(dates == (40...44).map(day))
        let near = try h.request("GET", "/v1/weather/trip?lat=48.85&lon=2.35&start=\(day(2))&end=\(day(4))", headers: auth)
        #expect(near.json["provider"] as? String == "caiyun")
        #expect((near.json["daily"] as? [Any])?.count == 3)
    }

    /// A gateway with Caiyun alone answers the trips its outlook holds, all from one call, and
    /// says plainly when no provider covers a trip's days (it was 502 "try again later", and
    /// trips ending past UTC today+13 were refused without a call).
    @Test func aCaiyunOnlyGatewayAnswersTripsFromTheOutlookAndSaysWhatItCannotCover() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment(providers: "caiyun"))
        h.companions.append(fake)
        let auth = try session(h)
        let day = Self.shanghaiDay
        for (from, to) in [(1, 3), (10, 14), (0, 0)] {
            let trip = try h.request("GET", "/v1/weather/trip?lat=31.2304&lon=121.4737&start=\(day(from))&end=\(day(to))", headers: auth)
            #expect(trip.status == 200, "\(trip.text)")
            #expect((trip.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String } == (from...to).map(day))
            #expect(trip.json["current"] == nil && trip.json["provider"] as? String == "caiyun")
        }
        #expect(try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737&days=15", headers: auth).json["cache"] as? String == "hit")
        let calls = try fake.calls()
        #expect(calls.count == 1, "\(calls)")
        #expect((calls.first?["query"] as? [String: Any])?["dailysteps"] as? String == "15", "\(calls)")

        let far = try h.request("GET", "/v1/weather/trip?lat=31.2304&lon=121.4737&start=\(day(40))&end=\(day(44))", headers: auth)
        #expect(far.status == 502 && far.errorCode == "provider_error")
        #expect((far.json["error"] as? [String: Any])?["message"] as? String == "the weather providers of this gateway do not cover the days asked")
        #expect(far.headers["retry-after"] == nil)
        #expect(try fake.calls().count == 1, "Caiyun was asked for days it does not have")
    }

    /// A provider whose day has not turned (its series still starts at the place's yesterday)
    /// answers the cell's outlook a day short, and `days=15` is then asked for on its own: the
    /// same URL, whose answer the transport gives again. One call, not two (a billed call more a
    /// cell every minute of such a lag), and the log line and the counters say so.
    @Test func theOutlookAndDaysFifteenFromALaggingProviderCostOneCall() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 1, env: fake.environment(providers: "caiyun"))
        h.companions.append(fake)
        let auth = try session(h)
        let day = Self.shanghaiDay
        try fake.setMode("caiyun", "day_not_turned")
        let fifteen = try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737&days=15", headers: auth)
        #expect(fifteen.status == 200, "\(fifteen.text)")
        #expect((fifteen.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String } == (-1...13).map(day))
        #expect(try fake.calls().count == 1)
        #expect(h.log.contains("providers=caiyun:ok,caiyun:repeat"), "\(h.log)")
        // The outlook's own cut (14 days from today) is served from the same single call.
        let seven = try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737&days=7", headers: auth)
        #expect((seven.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String } == (0...6).map(day))
        #expect(try seven.json["cache"] as? String == "hit" && fake.calls().count == 1)
        h.stopApp()  // the worker writes what it counted
        #expect(h.sql("SELECT coalesce(sum(value), 0) FROM weather_counters WHERE name = 'provider.caiyun.calls'") == "1")
        #expect(h.sql("SELECT coalesce(sum(value), 0) FROM weather_counters WHERE name = 'provider.caiyun.errors'") == "0")
    }

    @Test func notConfiguredIs503() throws {
        let h = try GatewayHarness(workers: 2)
        let r = try h.request("GET", "/v1/weather?lat=1&lon=1", headers: try session(h))
        #expect(r.status == 503)
        #expect(r.errorCode == "provider_not_configured")
    }
}
