import Foundation
import Testing
import WeatherCore
import WeatherProviders

/// Monotonic nanoseconds moved by hand.
final class ManualNanoseconds: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UInt64 = 1_000_000_000
    var now: UInt64 { lock.withLock { value } }
    func advance(_ nanoseconds: UInt64) { lock.withLock { value += nanoseconds } }
}

@Suite struct RepeatedCallTransportTests {
    @Test func aCallRepeatedWithinTheWindowGetsTheFirstAnswerAgainWithoutGoingOut() throws {
        let clock = ManualNanoseconds()
        let base = RecordingTransport([.success(HTTPResult(status: 200, body: [1])), .success(HTTPResult(status: 200, body: [2]))])
        let transport = RepeatedCallTransport(base, windowSeconds: 2, clock: { clock.now })
        let first = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(first.body == [1] && !first.isRepeat)
        clock.advance(1_999_000_000)
        let again = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(again.body == [1] && again.isRepeat && base.urls.count == 1)
        clock.advance(1_000_000)  // two seconds since the answer arrived: asked again
        let later = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(later.body == [2] && !later.isRepeat)
        _ = try transport.get("https://p.test/b", timeoutSeconds: 1)
        #expect(base.urls == ["https://p.test/a", "https://p.test/a", "https://p.test/b"])
    }

    /// Within the window, but with the wall clock moved by the cache's TTL (a TTL of a second, a
    /// test's clock moved on) or set back, the provider is asked again: a repeat stored as a fresh
    /// copy would outlive its TTL.
    @Test func anAnswerAsOldAsTheCacheTTLIsNotGivenAgain() throws {
        let wall = ManualNanoseconds()  // counted in whole seconds here
        let base = RecordingTransport([.success(HTTPResult(status: 200, body: [1])), .success(HTTPResult(status: 200, body: [2]))])
        let transport = RepeatedCallTransport(
            base, windowSeconds: 2, clock: { 0 }, freshSeconds: 1, wallClock: { Timestamp(seconds: Int64(wall.now)) })
        _ = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(try transport.get("https://p.test/a", timeoutSeconds: 1).isRepeat, "the same second: repeated")
        wall.advance(1)
        let later = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(later.body == [2] && !later.isRepeat && base.urls.count == 2)

        let elapsed = ManualNanoseconds()  // seconds the wall clock has gone back
        let back = RecordingTransport(body: [3])
        let setBack = RepeatedCallTransport(
            back, clock: { 0 }, freshSeconds: 600, wallClock: { Timestamp(seconds: 2_000_000_000 - Int64(elapsed.now)) })
        _ = try setBack.get("https://p.test/a", timeoutSeconds: 1)
        elapsed.advance(5)
        #expect(try !setBack.get("https://p.test/a", timeoutSeconds: 1).isRepeat && back.urls.count == 2, "a clock set back: asked again")
    }

    /// A 429 (or any non-2xx) is never given again, a call that fails leaves the last answer, and
    /// an answer over `maxKeptBytes` is not kept.
    @Test func onlyASuccessIsGivenAgainAndAFailedCallLeavesIt() throws {
        let base = RecordingTransport([
            .success(HTTPResult(status: 429, retryAfterSeconds: 30, body: [])),
            .success(HTTPResult(status: 200, body: [1])),
            .failure(.timeout),
        ])
        let transport = RepeatedCallTransport(base, clock: { 0 })
        #expect(try transport.get("https://p.test/a", timeoutSeconds: 1).status == 429)
        let ok = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(ok.status == 200 && !ok.isRepeat && base.urls.count == 2)
        #expect(throws: ProviderFailure.timeout) { try transport.get("https://p.test/b", timeoutSeconds: 1) }
        let again = try transport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(again.body == [1] && again.isRepeat && base.urls.count == 3)

        // A body larger than any forecast is not held between calls.
        let big = RecordingTransport(body: [UInt8](repeating: 0x20, count: RepeatedCallTransport.maxKeptBytes + 1))
        let bigTransport = RepeatedCallTransport(big, clock: { 0 })
        _ = try bigTransport.get("https://p.test/a", timeoutSeconds: 1)
        #expect(try !bigTransport.get("https://p.test/a", timeoutSeconds: 1).isRepeat && big.urls.count == 2)
    }

    /// Caiyun's series of 15 days from 30 November, the place's yesterday half a minute after
    /// Shanghai's midnight: a provider whose day has not turned.
    func fifteenDaysFromYesterday() throws -> [UInt8] {
        var object = try Fixture.object(Fixture.caiyunWeather)
        var result = object["result"] as! [String: Any]
        var daily = result["daily"] as! [String: Any]
        for (series, value) in daily {
            guard let entries = value as? [[String: Any]], !entries.isEmpty else { continue }
            daily[series] = (0..<15).map { i -> [String: Any] in
                var entry = entries[i % entries.count]
                entry["date"] = "\(LocalDate("2026-11-30")!.adding(days: i))T00:00+08:00"
                return entry
            }
        }
        result["daily"] = daily
        object["result"] = result
        return try Fixture.encode(object)
    }

    /// The outlook of a provider whose day has not turned comes back a day short, and `days=15`
    /// asks the same URL: cut from the same answer, no call, an attempt that says `repeat`.
    @Test func theOutlookAndDaysFifteenOfALaggingProviderAreOneCall() throws {
        let justAfter = Timestamp(iso8601: "2026-11-30T16:00:30Z")!  // 00:00:30 in Shanghai
        let base = RecordingTransport(body: try fifteenDaysFromYesterday())
        let caiyun = CaiyunProvider(baseURL: "https://caiyun.test", token: "t", transport: RepeatedCallTransport(base, clock: { 0 }), timeoutSeconds: 1)
        let chain = ProviderChain([caiyun])
        let outlook = chain.fetch(.outlook, at: shanghai, now: justAfter)
        #expect(try outlook.result.get().daily.count == 14 && outlook.providerCalls == 1 && outlook.attempts.map(\.code) == ["ok"])
        let fifteen = chain.fetch(.forecast(days: 15), at: shanghai, now: justAfter)
        let report = try fifteen.result.get()
        #expect(report.daily.count == 15 && report.daily.first?.date == "2026-11-30" && report.dayNotTurned)
        #expect(fifteen.providerCalls == 0 && fifteen.attempts.map(\.code) == ["repeat"])
        #expect(base.urls.count == 1)
        #expect(chain.fetch(.forecast(days: 7), at: shanghai, now: justAfter).providerCalls == 1, "another URL is a call")
        #expect(base.urls.count == 2)
    }

    /// An answer given again that lacks the days asked is neither a call nor an error: the next
    /// provider is asked.
    @Test func anAnswerGivenAgainThatLacksTheDaysIsNoCall() throws {
        let base = RecordingTransport(body: try Fixture.bytes(Fixture.caiyunWeather))  // seven days
        let caiyun = CaiyunProvider(baseURL: "https://caiyun.test", token: "t", transport: RepeatedCallTransport(base, clock: { 0 }), timeoutSeconds: 1)
        let next = StubProvider("next")
        let chain = ProviderChain([caiyun, next])
        #expect(chain.fetch(.outlook, at: shanghai, now: fixtureNow).providerCalls == 1)
        let fell = chain.fetch(.forecast(days: 15), at: shanghai, now: fixtureNow)
        #expect(
            fell.attempts == [
                ProviderAttempt(provider: "caiyun", failure: .notCovered, calledProvider: true, repeated: true),
                ProviderAttempt(provider: "next", failure: nil, calledProvider: true),
            ])
        #expect(fell.providerCalls == 1 && fell.providerErrors == 0 && base.urls.count == 1 && next.calls == 1)

        // Alone, Caiyun answered without the days: the provider's shortfall (502 "try again
        // later"), not days no provider covers, which only a skip without asking is (a review:
        // the repeat passed for a skip).
        let alone = ProviderChain([caiyun])
        _ = alone.fetch(.outlook, at: shanghai, now: fixtureNow)
        let short = alone.fetch(.forecast(days: 15), at: shanghai, now: fixtureNow)
        #expect(short.result == .failure(.providerError) && short.providerCalls == 0 && short.attempts.map(\.code) == ["not_covered"])
    }

    /// An answer given again neither starts nor lengthens a pause, nor ends a run of failures:
    /// only calls do (a review: a kept maintenance page given to the probe after a pause doubled
    /// the pause for every worker without a call).
    @Test func anAnswerGivenAgainNeitherPausesNorEndsARunOfFailures() throws {
        let clock = ProviderChainTests.SetClock()
        func chain(_ answers: [Result<HTTPResult, ProviderFailure>]) -> (ProviderChain, RecordingTransport) {
            let base = RecordingTransport(answers)
            let caiyun = CaiyunProvider(baseURL: "https://caiyun.test", token: "t", transport: RepeatedCallTransport(base, clock: { 0 }), timeoutSeconds: 1)
            return (ProviderChain([caiyun]), base)
        }
        var cooldowns = ProviderCooldowns(longest: 30)
        func fetch(_ chain: ProviderChain, _ query: WeatherQuery, at second: Int64) -> ChainOutcome {
            clock.current = fixtureNow.adding(seconds: second)
            return chain.fetch(query, at: shanghai, now: clock.current, cooldowns: &cooldowns, clock: clock)
        }
        // A 200 that is not JSON pauses Caiyun for 1 s; the same page given again after it does not.
        let (page, pageCalls) = chain([.success(HTTPResult(status: 200, body: Array("<html>down for maintenance</html>".utf8)))])
        #expect(fetch(page, .forecast(days: 7), at: 0).retryAfter == 1)
        let again = fetch(page, .forecast(days: 7), at: 1)
        #expect(again.attempts.map(\.code) == ["not_json"] && again.attempts.first?.repeated == true && again.retryAfter == nil)
        #expect(fetch(page, .forecast(days: 7), at: 1).attempts.map(\.code) == ["not_json"], "not skipped: no new pause")
        #expect(pageCalls.urls.count == 1)

        // A success given again leaves a run of failures as it is: the next failure pauses 2 s.
        cooldowns = ProviderCooldowns(longest: 30)
        let (flaky, flakyCalls) = chain([.success(HTTPResult(status: 200, body: try Fixture.bytes(Fixture.caiyunWeather))), .failure(.timeout)])
        #expect(fetch(flaky, .forecast(days: 7), at: 10).providerCalls == 1)  // kept
        #expect(fetch(flaky, .forecast(days: 3), at: 10).retryAfter == 1)  // another URL times out: 1 s
        let repeated = fetch(flaky, .forecast(days: 7), at: 11)
        #expect(repeated.attempts.map(\.code) == ["repeat"] && repeated.providerCalls == 0)
        #expect(fetch(flaky, .forecast(days: 3), at: 11).retryAfter == 2, "the second failure in a row")
        #expect(flakyCalls.urls.count == 3)
    }
}
