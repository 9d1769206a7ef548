import Foundation
import Testing
import WeatherCore
import WeatherProviders

/// A provider that answers from a script and counts its calls.
final class StubProvider: WeatherProvider, @unchecked Sendable {
    let name: String
    private var scripted: Result<Void, ProviderFailure>
    /// Runs inside each call (a test moves its clock here to make the call take time).
    var duringCall: (() -> Void)?
    private let covers: Bool
    private let lock = NSLock()
    private var count = 0
    private var givenSeconds: [Double] = []

    init(_ name: String, _ answer: Result<Void, ProviderFailure> = .success(()), covers: Bool = true) {
        self.name = name
        self.scripted = answer
        self.covers = covers
    }

    var calls: Int { lock.withLock { count } }
    /// The time each call was given by the chain (`within`), in order.
    var given: [Double] { lock.withLock { givenSeconds } }
    /// What the next calls answer.
    var answer: Result<Void, ProviderFailure> {
        get { lock.withLock { scripted } }
        set { lock.withLock { scripted = newValue } }
    }

    func canCover(_ query: WeatherQuery, now: Timestamp) -> Bool { covers }

    func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> ProviderCall {
        lock.withLock { givenSeconds.append(seconds) }
        return call(query, at: point, now: now)
    }

    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) throws(ProviderFailure) -> WeatherReport {
        let answer = lock.withLock {
            count += 1; return scripted
        }
        duringCall?()
        try answer.get()
        return WeatherReport(provider: name, location: point, timezone: "UTC", current: nil, daily: [], fetchedAt: now.iso8601)
    }
}

@Suite struct ProviderChainTests {
    func run(_ providers: [any WeatherProvider], _ query: WeatherQuery = .forecast(days: 7)) -> ChainOutcome {
        ProviderChain(providers).fetch(query, at: shanghai, now: fixtureNow)
    }

    @Test func firstSuccessWinsAndLaterProvidersAreNotCalled() throws {
        let a = StubProvider("a"), b = StubProvider("b")
        let outcome = run([a, b])
        #expect(try outcome.result.get().provider == "a")
        #expect(outcome.attempts == [ProviderAttempt(provider: "a", failure: nil, calledProvider: true)])
        #expect(outcome.providerCalls == 1 && outcome.providerErrors == 0)
        #expect(b.calls == 0)
    }

    @Test func failureFailsOverToTheNextProvider() throws {
        let outcome = run([StubProvider("a", .failure(.httpStatus(429, retryAfter: 30))), StubProvider("b")])
        #expect(try outcome.result.get().provider == "b")
        #expect(outcome.attempts.map(\.provider) == ["a", "b"])
        #expect(outcome.attempts[0].failure == .httpStatus(429, retryAfter: 30))
        #expect(outcome.attempts[1].succeeded)
        #expect(outcome.providerCalls == 2 && outcome.providerErrors == 1)
    }

    @Test func lastCalledProviderTimingOutMakesTheChainTimeOut() {
        let outcome = run([StubProvider("a", .failure(.unparseable)), StubProvider("b", .failure(.timeout))])
        #expect(outcome.result == .failure(.timeout))
        #expect(outcome.providerCalls == 2 && outcome.providerErrors == 2)
    }

    @Test func anyOtherLastFailureIsAProviderError() {
        let outcome = run([StubProvider("a", .failure(.timeout)), StubProvider("b", .failure(.httpStatus(500, retryAfter: nil)))])
        #expect(outcome.result == .failure(.providerError))
        #expect(outcome.attempts.map(\.failure) == [.timeout, .httpStatus(500, retryAfter: nil)])
    }

    @Test func timeoutThenSkipStillTimesOut() {
        let skipped = StubProvider("b", covers: false)
        let outcome = run([StubProvider("a", .failure(.timeout)), skipped])
        #expect(outcome.result == .failure(.timeout))
        #expect(outcome.attempts[1] == ProviderAttempt(provider: "b", failure: .notCovered, calledProvider: false))
        #expect(skipped.calls == 0)
        #expect(outcome.providerCalls == 1 && outcome.providerErrors == 1)
    }

    @Test func skippedProvidersAreNeitherCallsNorErrors() throws {
        let skipped = StubProvider("a", covers: false)
        let outcome = run([skipped, StubProvider("b")])
        #expect(try outcome.result.get().provider == "b")
        #expect(skipped.calls == 0)
        #expect(outcome.providerCalls == 1 && outcome.providerErrors == 0)
    }

    /// Not a provider error: no retry can help (a Caiyun-only gateway asked for a far trip).
    @Test func nothingCoveredIsNotCovered() {
        let outcome = run([StubProvider("a", covers: false), StubProvider("b", covers: false)])
        #expect(outcome.result == .failure(.notCovered))
        #expect(outcome.providerCalls == 0 && outcome.providerErrors == 0)
        #expect(outcome.attempts.count == 2)
    }

    /// An answer without the days asked is a call, not an error of the provider (its health in
    /// `weatherctl stats`); yet the fetch failed as a provider error ("try again later"), not as
    /// days no provider covers ("asking again will not help"): the provider may have them when
    /// asked again (its day not turned yet). With any other failure in the chain, the same.
    @Test func notCoveredAfterACallIsACallButNoError() {
        let outcome = run([StubProvider("a", .failure(.notCovered))])
        #expect(outcome.result == .failure(.providerError))
        let skippedThenShort = run([StubProvider("s", covers: false), StubProvider("a", .failure(.notCovered))])
        #expect(skippedThenShort.result == .failure(.providerError))
        #expect(outcome.providerCalls == 1 && outcome.providerErrors == 0)
        let mixed = run([StubProvider("a", .failure(.notCovered)), StubProvider("b", .failure(.httpStatus(500, retryAfter: nil)))])
        #expect(mixed.result == .failure(.providerError))
        #expect(mixed.providerCalls == 2 && mixed.providerErrors == 1)
    }

    @Test func emptyChainIsAProviderErrorWithNoAttempts() {
        #expect(ProviderChain([]).isEmpty)
        let outcome = run([])
        #expect(outcome.result == .failure(.providerError))
        #expect(outcome.attempts.isEmpty)
    }

    @Test func farTripSkipsCaiyunWithoutACallAndVisualCrossingAnswers() throws {
        let caiyunTransport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        let vcTransport = try RecordingTransport(body: Fixture.bytes(Fixture.vcTrip))
        let chain = ProviderChain([
            CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: caiyunTransport, timeoutSeconds: 1),
            VisualCrossingProvider(baseURL: "https://vc.invalid", apiKey: "k", transport: vcTransport, timeoutSeconds: 1),
        ])
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-20")!, end: LocalDate("2026-12-24")!)
        let outcome = chain.fetch(trip, at: newYork, now: fixtureNow)
        let report = try outcome.result.get()
        #expect(report.provider == "visualcrossing")
        #expect(report.daily.count == 5)
        #expect(caiyunTransport.urls.isEmpty)
        #expect(vcTransport.urls.count == 1)
        #expect(
            outcome.attempts == [
                ProviderAttempt(provider: "caiyun", failure: .notCovered, calledProvider: false),
                ProviderAttempt(provider: "visualcrossing", failure: nil, calledProvider: true),
            ])
        #expect(outcome.providerCalls == 1)
    }

    @Test func realProvidersFailOverOnAnHTMLGatewayError() throws {
        let caiyunTransport = RecordingTransport(status: 502, body: Array("<html>Bad Gateway</html>".utf8))
        let vcTransport = try RecordingTransport(body: Fixture.bytes(Fixture.vcForecast))
        let chain = ProviderChain([
            CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: caiyunTransport, timeoutSeconds: 1),
            VisualCrossingProvider(baseURL: "https://vc.invalid", apiKey: "k", transport: vcTransport, timeoutSeconds: 1),
        ])
        let outcome = chain.fetch(.forecast(days: 3), at: newYork, now: fixtureNow)
        #expect(try outcome.result.get().provider == "visualcrossing")
        #expect(outcome.attempts[0].failure == .httpStatus(502, retryAfter: nil))
        #expect(outcome.providerCalls == 2 && outcome.providerErrors == 1)
    }

    // MARK: The fetch's time (`within`)

    /// Each provider is given what is left of the fetch's time, and a real provider asks its
    /// transport for no longer than that or its own timeout, whichever is shorter.
    @Test func eachProviderIsGivenWhatIsLeftOfTheFetchsTime() throws {
        let a = StubProvider("a", .failure(.transport)), b = StubProvider("b")
        a.duringCall = { usleep(500_000) }  // a failed after half a second
        var none = ProviderCooldowns(longest: 0)
        let outcome = ProviderChain([a, b]).fetch(.forecast(days: 7), at: shanghai, now: fixtureNow, cooldowns: &none, clock: SetClock(), within: 5)
        #expect(try outcome.result.get().provider == "b")
        #expect(a.given.count == 1 && b.given.count == 1)
        #expect(a.given[0] <= 5 && a.given[0] > 4, "\(a.given)")
        #expect(b.given[0] <= 4.5 && b.given[0] > 3.5, "what was left after a's half second: \(b.given)")

        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.vcForecast))
        let vc = VisualCrossingProvider(baseURL: "https://vc.invalid", apiKey: "k", transport: transport, timeoutSeconds: 4)
        _ = vc.call(.forecast(days: 3), at: newYork, now: fixtureNow, within: 1.5)
        _ = vc.call(.forecast(days: 3), at: newYork, now: fixtureNow, within: 30)
        _ = vc.call(.forecast(days: 3), at: newYork, now: fixtureNow)
        #expect(transport.timeouts == [1.5, 4, 4])
        let caiyunTransport = RecordingTransport(status: 500, body: [])
        let caiyun = CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: caiyunTransport, timeoutSeconds: 4)
        _ = caiyun.call(.forecast(days: 3), at: shanghai, now: fixtureNow, within: 0.5)
        #expect(caiyunTransport.timeouts == [0.5])
    }

    /// Once the fetch's time is spent (by the providers before, or by the request before the
    /// fetch), the providers left are skipped without a call (`out_of_time`) and the fetch times
    /// out; being skipped says nothing of a provider, so none is paused for it.
    @Test func noProviderIsAskedOnceTheFetchsTimeIsSpentAndNoneIsPausedForIt() {
        let a = StubProvider("a", .failure(.transport)), b = StubProvider("b")
        var chain = PausingChain([a, b])
        a.duringCall = { usleep(200_000) }  // a connection that failed after 0.2 s of the 0.25
        let spent = chain.chain.fetch(.forecast(days: 7), at: shanghai, now: fixtureNow, cooldowns: &chain.cooldowns, clock: chain.clock, within: 0.25)
        #expect(spent.result == .failure(.timeout))
        #expect(spent.attempts.map(\.code) == ["transport", "out_of_time"] && b.calls == 0)
        #expect(spent.providerCalls == 1 && spent.providerErrors == 1)

        a.answer = .failure(.timeout)
        a.duringCall = nil
        let none = chain.chain.fetch(.forecast(days: 7), at: shanghai, now: fixtureNow, cooldowns: &chain.cooldowns, clock: chain.clock, within: 0.05)
        #expect(none.result == .failure(.timeout) && none.providerCalls == 0)
        // a, paused since its transport failure, says so whatever the time; b is out of time.
        #expect(none.attempts.map(\.code) == ["cooling_down", "out_of_time"] && none.attempts.allSatisfy { !$0.calledProvider }, "\(none.attempts)")
        #expect(a.calls == 1 && b.calls == 0)
        // a is paused for its transport failure; b, skipped twice for time, is not.
        let later = chain.fetch(at: 0)
        #expect(later.attempts.map(\.code) == ["cooling_down", "ok"] && b.calls == 1)
    }

    /// A call given less than its provider's own timeout that runs out of that time did not
    /// overrun the provider's timeout: `out_of_time`, a provider call but no provider error, and
    /// no pause (it would have paused a healthy provider for every worker because one request was
    /// short of time; a review). The fetch still fails as a timeout. With its own timeout, the
    /// same failure is the provider's `timeout`.
    @Test func aCallCutShortByTheFetchsTimeIsNoProviderFailure() {
        let transport = RecordingTransport([.failure(.timeout)])
        let caiyun = CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: transport, timeoutSeconds: 4)
        #expect(caiyun.call(.forecast(days: 3), at: shanghai, now: fixtureNow, within: 0.5).result == .failure(.outOfTime))
        #expect(caiyun.call(.forecast(days: 3), at: shanghai, now: fixtureNow, within: 30).result == .failure(.timeout))
        #expect(caiyun.call(.forecast(days: 3), at: shanghai, now: fixtureNow).result == .failure(.timeout))

        var chain = PausingChain([caiyun])
        let short = chain.chain.fetch(.forecast(days: 3), at: shanghai, now: fixtureNow, cooldowns: &chain.cooldowns, clock: chain.clock, within: 1)
        #expect(short.result == .failure(.timeout) && short.attempts.map(\.code) == ["out_of_time"])
        #expect(short.providerCalls == 1 && short.providerErrors == 0)
        let next = chain.fetch(at: 0)  // not paused: called again, with its own timeout
        #expect(next.attempts.map(\.code) == ["timeout"] && next.providerErrors == 1)
        let asked = Array(transport.timeouts.suffix(2))
        #expect(asked.count == 2 && asked[0] <= 1 && asked[0] > 0.5 && asked[1] == 4, "\(transport.timeouts)")
        #expect(chain.fetch(at: 0).attempts.map(\.code) == ["cooling_down"], "its own timeout pauses it")
    }

    // MARK: Pauses after failures (ProviderCooldowns)

    /// A clock the test sets; the chain reads it after each call.
    final class SetClock: Clock, @unchecked Sendable {
        var current = fixtureNow
        func now() -> Timestamp { current }
    }

    /// Calls `chain` at `fixtureNow + second`, keeping the pauses between calls. Calls take no
    /// time unless a provider's `duringCall` moves `clock`.
    struct PausingChain {
        let chain: ProviderChain
        var cooldowns: ProviderCooldowns
        var clock = SetClock()
        init(_ providers: [any WeatherProvider], longest: Int64 = 30, board: (any ProviderPauseBoard)? = nil, probeSeconds: Int64 = 0) {
            chain = ProviderChain(providers)
            cooldowns = ProviderCooldowns(longest: longest, board: board, probeSeconds: probeSeconds)
        }
        mutating func fetch(at second: Int64) -> ChainOutcome {
            clock.current = fixtureNow.adding(seconds: second)
            return chain.fetch(.forecast(days: 7), at: shanghai, now: clock.current, cooldowns: &cooldowns, clock: clock)
        }
    }

    /// A 4 s timeout must not use up a pause of 1, 2 or 4 s before it begins: the pause and the
    /// answer's `retryAfter` count from the end of the fetch, not the request's start.
    @Test func aPauseStartsWhenTheFailedCallEnds() {
        let a = StubProvider("a", .failure(.timeout))
        var chain = PausingChain([a])
        let clock = chain.clock
        a.duringCall = { clock.current = clock.current.adding(seconds: 4) }
        let first = chain.fetch(at: 0)  // times out at 4: paused until 5
        #expect(first.retryAfter == 1)
        _ = chain.fetch(at: 4)
        #expect(a.calls == 1, "the request at 4 s is inside the pause that began when the call ended")
        _ = chain.fetch(at: 5)  // the second timeout ends at 9: paused until 11
        #expect(a.calls == 2)
        let skipped = chain.fetch(at: 10)
        #expect(a.calls == 2 && skipped.result == .failure(.timeout) && skipped.retryAfter == 1)
    }

    @Test func aFailingProviderIsSkippedForAPauseThatDoublesAndOneSuccessEndsIt() throws {
        let a = StubProvider("a", .failure(.transport)), b = StubProvider("b")
        var chain = PausingChain([a, b])
        // Failure 1 at 0 s: a pause of 1 s, so at 0 a is not asked again, at 1 it is.
        #expect(try chain.fetch(at: 0).result.get().provider == "b")
        let skipped = chain.fetch(at: 0)
        #expect(try skipped.result.get().provider == "b")
        #expect(skipped.attempts[0] == ProviderAttempt(provider: "a", failure: .coolingDown, calledProvider: false))
        #expect(skipped.providerCalls == 1 && skipped.providerErrors == 0)
        #expect(a.calls == 1)
        _ = chain.fetch(at: 1)  // failure 2: 2 s
        #expect(a.calls == 2)
        _ = chain.fetch(at: 2)
        #expect(a.calls == 2)
        _ = chain.fetch(at: 3)  // failure 3: 4 s, until 7
        _ = chain.fetch(at: 6)
        #expect(a.calls == 3)
        a.answer = .success(())
        #expect(try chain.fetch(at: 7).result.get().provider == "a")
        #expect(a.calls == 4)
        a.answer = .failure(.transport)
        _ = chain.fetch(at: 8)  // the first failure after a success: 1 s again
        _ = chain.fetch(at: 9)
        #expect(a.calls == 6)
    }

    @Test func pausesStopGrowingAtTheLongestAndARetryAfterLengthensThem() {
        let cooldowns = ProviderCooldowns(longest: 30)
        #expect((1...8).map { cooldowns.seconds(afterFailures: $0, retryAfter: nil) } == [1, 2, 4, 8, 16, 30, 30, 30])
        #expect(cooldowns.seconds(afterFailures: 1_000, retryAfter: nil) == 30)
        #expect(cooldowns.seconds(afterFailures: 1, retryAfter: 20) == 20)
        #expect(cooldowns.seconds(afterFailures: 5, retryAfter: 3) == 16)
        // A provider's own Retry-After is kept beyond the setting, up to an hour (it was cut to
        // 30 s: a provider whose quota was spent got a call every 30 s).
        #expect(cooldowns.seconds(afterFailures: 1, retryAfter: 600) == 600)
        #expect(cooldowns.seconds(afterFailures: 1, retryAfter: 86_400) == 3_600)
        #expect(ProviderCooldowns(longest: 7_200).seconds(afterFailures: 1, retryAfter: 86_400) == 7_200)

        let quota = StubProvider("q", .failure(.httpStatus(429, retryAfter: 900)))
        var spent = PausingChain([quota])
        #expect(spent.fetch(at: 0).retryAfter == 900)
        #expect(spent.fetch(at: 899).providerCalls == 0)
        _ = spent.fetch(at: 900)
        #expect(quota.calls == 2)

        let a = StubProvider("a", .failure(.httpStatus(429, retryAfter: 20)))
        var chain = PausingChain([a])
        let first = chain.fetch(at: 0)
        #expect(first.result == .failure(.providerError))
        #expect(first.retryAfter == 20)
        let during = chain.fetch(at: 19)
        #expect(during.retryAfter == 1 && during.providerCalls == 0)
        _ = chain.fetch(at: 20)
        #expect(a.calls == 2)
    }

    @Test func whenEveryProviderPausesTheChainRepeatsTheLastFailureAndSaysWhenToRetry() {
        let a = StubProvider("a", .failure(.httpStatus(503, retryAfter: nil))), b = StubProvider("b", .failure(.timeout))
        var chain = PausingChain([a, b])
        _ = chain.fetch(at: 0)
        _ = chain.fetch(at: 1)  // both fail a second time: 2 s each, until 3
        let skipped = chain.fetch(at: 2)
        #expect(a.calls == 2 && b.calls == 2)
        #expect(skipped.result == .failure(.timeout))  // b, the last, timed out
        #expect(skipped.retryAfter == 1)
        #expect(skipped.attempts.map(\.failure) == [.coolingDown, .coolingDown])
        #expect(skipped.providerCalls == 0)
        b.answer = .failure(.unparseable)
        _ = chain.fetch(at: 3)
        #expect(chain.fetch(at: 3).result == .failure(.providerError))
    }

    @Test func offNoAnswerOutsideTheDatesAndAnotherProviderStartNoPause() {
        let a = StubProvider("a", .failure(.timeout))
        var off = PausingChain([a], longest: 0)
        let outcome = off.fetch(at: 0)
        _ = off.fetch(at: 0)
        #expect(a.calls == 2 && outcome.retryAfter == nil)

        let notCovering = StubProvider("n", .failure(.notCovered)), b = StubProvider("b", .failure(.transport))
        var chain = PausingChain([notCovering, b])
        _ = chain.fetch(at: 0)
        let again = chain.fetch(at: 0)
        #expect(notCovering.calls == 2 && b.calls == 1)
        #expect(again.retryAfter == 1)
    }

    /// Two providers timing out one after the other: both pauses start when the fetch ends, so
    /// the next request skips both (counted from each call's end, Caiyun's 1 s pause was used up
    /// by Visual Crossing's 4 s timeout and the next request waited for both again).
    @Test func pausesStartWhenTheWholeFetchEnds() {
        let a = StubProvider("a", .failure(.timeout)), b = StubProvider("b", .failure(.timeout))
        var chain = PausingChain([a, b])
        let clock = chain.clock
        a.duringCall = { clock.current = clock.current.adding(seconds: 4) }
        b.duringCall = { clock.current = clock.current.adding(seconds: 4) }
        let first = chain.fetch(at: 0)  // ends at 8: both paused until 9
        #expect(first.retryAfter == 1)
        let next = chain.fetch(at: 8)
        #expect(a.calls == 1 && b.calls == 1, "the request right after the fetch called a provider again")
        #expect(next.result == .failure(.timeout) && next.retryAfter == 1)
    }

    /// A board in memory with room for `room` providers, as the `-writer` page has for eight.
    final class MemoryBoard: ProviderPauseBoard, @unchecked Sendable {
        var records: [String: ProviderPause] = [:]
        let room: Int
        init(room: Int = 8) { self.room = room }
        func pause(of provider: String) -> ProviderPause? { records[provider] }
        func update(_ provider: String, _ change: (ProviderPause?) -> ProviderPause?) -> Bool {
            guard records[provider] != nil || records.count < room else { return false }
            records[provider] = change(records[provider])
            return true
        }
    }

    /// Two workers on one board: a provider one of them found failing is skipped by the other,
    /// failures in a row count once whichever worker saw them, and a success by either ends the
    /// pause for both. The failure a skipped provider stands for survives the board's encoding.
    @Test func workersOnOneBoardShareThePauses() throws {
        let board = MemoryBoard()
        let a1 = StubProvider("a", .failure(.timeout)), a2 = StubProvider("a", .failure(.timeout))
        var first = PausingChain([a1], board: board), second = PausingChain([a2], board: board)
        second.clock = first.clock
        #expect(first.fetch(at: 0).retryAfter == 1)
        let skipped = second.fetch(at: 0)
        #expect(a2.calls == 0, "the second worker called a provider the first had just found failing")
        #expect(skipped.result == .failure(.timeout) && skipped.retryAfter == 1)
        #expect(second.chain.pausedOutcome(.forecast(days: 7), now: fixtureNow, cooldowns: second.cooldowns)?.retryAfter == 1)
        _ = second.fetch(at: 1)  // the second failure in a row, seen by the second worker: 2 s
        #expect(a2.calls == 1 && board.records["a"]?.failures == 2)
        #expect(first.fetch(at: 2).retryAfter == 1 && a1.calls == 1)
        a1.answer = .success(())
        #expect(try first.fetch(at: 3).result.get().provider == "a")
        #expect(board.records["a"] == nil)
        #expect(second.cooldowns.pause(of: "a", now: fixtureNow.adding(seconds: 3)) == nil)

        for failure: ProviderFailure in [.timeout, .transport, .httpStatus(503, retryAfter: 7), .providerError, .unparseable] {
            var cooldowns = ProviderCooldowns(longest: 30, board: MemoryBoard())
            cooldowns.failed("a", failure, now: fixtureNow)
            let kept: ProviderFailure = if case .httpStatus(let status, _) = failure { .httpStatus(status, retryAfter: nil) } else { failure }
            #expect(cooldowns.pause(of: "a", now: fixtureNow)?.failure == kept)
        }
    }

    /// When a pause ends, one worker tests the provider and the others go on skipping it until
    /// that call is over, answering at once (an incident drill: with providers slower than their
    /// timeout, every worker called them at each pause's end and served nobody meanwhile). The
    /// test's failure is one more in a row; its success ends the pause for everyone.
    @Test func oneWorkerTestsAProviderWhenItsPauseEnds() throws {
        let board = MemoryBoard()
        let a1 = StubProvider("a", .failure(.timeout)), a2 = StubProvider("a", .failure(.timeout))
        var first = PausingChain([a1], board: board, probeSeconds: 5), second = PausingChain([a2], board: board, probeSeconds: 5)
        second.clock = first.clock
        _ = first.fetch(at: 0)  // paused until 1
        var meanwhile: ChainOutcome?
        a1.duringCall = { meanwhile = second.fetch(at: 1) }  // while the first worker's test call is under way
        _ = first.fetch(at: 1)
        #expect(a1.calls == 2 && a2.calls == 0, "one call tested the provider")
        #expect(meanwhile?.result == .failure(.timeout) && meanwhile?.retryAfter == 5, "the other answered at once")
        #expect(board.records["a"]?.failures == 2 && board.records["a"]?.until == fixtureNow.adding(seconds: 3), "one more failure in a row: 2 s")

        a1.duringCall = nil
        a2.answer = .success(())
        #expect(try second.fetch(at: 3).result.get().provider == "a")
        #expect(board.records["a"] == nil)
        a1.answer = .success(())
        #expect(try first.fetch(at: 3).result.get().provider == "a", "called as before")

        // Two providers whose pauses ended together are tested by one worker, not one each: a
        // gateway of two workers stalled for the timeout (a re-check of the drill).
        let board2 = MemoryBoard()
        let c1 = StubProvider("c", .failure(.timeout)), d1 = StubProvider("d", .failure(.timeout))
        let c2 = StubProvider("c", .failure(.timeout)), d2 = StubProvider("d", .failure(.timeout))
        var one = PausingChain([c1, d1], board: board2, probeSeconds: 9), other = PausingChain([c2, d2], board: board2, probeSeconds: 9)
        other.clock = one.clock
        _ = one.fetch(at: 0)  // both paused until 1
        var during: ChainOutcome?
        c1.duringCall = { during = other.fetch(at: 1) }
        _ = one.fetch(at: 1)
        #expect(c1.calls == 2 && d1.calls == 2, "the first worker tested both")
        #expect(c2.calls == 0 && d2.calls == 0, "the other tested neither")
        #expect(during?.result == .failure(.timeout) && during?.retryAfter == 9)
        #expect(board2.records["c"]?.failures == 2 && board2.records["d"]?.failures == 2)

        // A hold the fetch did not settle is given back: a fallback not reached (the first
        // provider answered) or one whose failure pauses nothing stays callable for the others
        // (a review: a healthy fallback stayed held, renewed by steady traffic, and was skipped
        // when the first provider failed).
        let board3 = MemoryBoard()
        let e1 = StubProvider("e"), f1 = StubProvider("f", .failure(.timeout))
        let e2 = StubProvider("e"), f2 = StubProvider("f")
        var steady = PausingChain([e1, f1], board: board3, probeSeconds: 9), later = PausingChain([e2, f2], board: board3, probeSeconds: 9)
        later.clock = steady.clock
        f1.answer = .failure(.timeout)
        e1.answer = .failure(.timeout)
        _ = steady.fetch(at: 0)  // both fail: paused until 1
        e1.answer = .success(())
        for second in stride(from: Int64(2), through: 20, by: 2) { _ = try steady.fetch(at: second).result.get() }
        #expect(f1.calls == 1 && board3.records["f"]?.until == fixtureNow.adding(seconds: 1), "f's pause as it was, not held")
        e2.answer = .failure(.timeout)
        #expect(try later.fetch(at: 21).result.get().provider == "f", "the fallback was asked")
        #expect(f2.calls == 1)
        let g1 = StubProvider("g", .failure(.timeout)), g2 = StubProvider("g")
        let board4 = MemoryBoard()
        var prober = PausingChain([g1], board: board4, probeSeconds: 9), next = PausingChain([g2], board: board4, probeSeconds: 9)
        next.clock = prober.clock
        _ = prober.fetch(at: 0)
        g1.answer = .failure(.unparseable)  // an answer it could not use: pauses nothing
        _ = prober.fetch(at: 1)
        #expect(try next.fetch(at: 2).result.get().provider == "g" && g2.calls == 1, "not held after an answer")

        // A hold given back keeps what another worker recorded during it: a 429 whose call was
        // under way when the hold began must keep the provider paused (a review found it wiped).
        let board5 = MemoryBoard()
        let h1 = StubProvider("h"), i1 = StubProvider("i", .failure(.timeout))
        var holder = PausingChain([h1, i1], board: board5, probeSeconds: 9)
        h1.answer = .failure(.timeout)
        _ = holder.fetch(at: 0)  // both paused until 1
        h1.answer = .success(())
        h1.duringCall = {
            var underWay = ProviderCooldowns(longest: 30, board: board5)
            underWay.failed("i", .httpStatus(429, retryAfter: 4), now: fixtureNow.adding(seconds: 2))
        }
        _ = try holder.fetch(at: 1).result.get()  // claims h and i; h answers; i's hold given back?
        #expect(holder.cooldowns.pause(of: "i", now: fixtureNow.adding(seconds: 3))?.failure == .httpStatus(429, retryAfter: nil))
        #expect(holder.cooldowns.pause(of: "i", now: fixtureNow.adding(seconds: 5)) != nil, "the 429's Retry-After stands")

        // Alone (no board) a worker claims nothing it would wait for: it calls as before.
        let alone = StubProvider("b", .failure(.timeout))
        var worker = PausingChain([alone], probeSeconds: 5)
        _ = worker.fetch(at: 0)
        _ = worker.fetch(at: 1)
        #expect(alone.calls == 2 && worker.cooldowns.pause(of: "b", now: fixtureNow.adding(seconds: 1))?.failures == 2)
    }

    /// Calls already on their way when another worker's failure began a pause are the same
    /// outage: they neither count as more failures in a row nor cut a `Retry-After` short. A
    /// record that ended more than the longest pause ago starts over (a new outage).
    @Test func callsAlreadyUnderWayNeitherEscalateNorShortenAPause() {
        let board = MemoryBoard()
        var a = ProviderCooldowns(longest: 30, board: board), b = ProviderCooldowns(longest: 30, board: board)
        a.failed("p", .httpStatus(429, retryAfter: 30), now: fixtureNow)
        b.failed("p", .transport, now: fixtureNow.adding(seconds: 1))  // sent before the 429 came back
        #expect(board.records["p"]?.failures == 1)
        #expect(board.records["p"]?.until == fixtureNow.adding(seconds: 30), "the 429's Retry-After was cut short")
        #expect(a.pause(of: "p", now: fixtureNow.adding(seconds: 29))?.failure == .transport, "the newest failure stands for the provider")
        b.failed("p", .transport, now: fixtureNow.adding(seconds: 30))  // the first call after the pause
        #expect(board.records["p"]?.failures == 2 && board.records["p"]?.until == fixtureNow.adding(seconds: 32))

        let eight = MemoryBoard()
        for _ in 0..<8 {
            var worker = ProviderCooldowns(longest: 30, board: eight)
            worker.failed("p", .timeout, now: fixtureNow)
        }
        #expect(
            eight.records["p"]?.failures == 1 && eight.records["p"]?.until == fixtureNow.adding(seconds: 1),
            "eight workers failing at once started the first pause at more than 1 s")

        var alone = ProviderCooldowns(longest: 30)
        for second: Int64 in [0, 1, 3, 7, 15] { alone.failed("p", .timeout, now: fixtureNow.adding(seconds: second)) }
        #expect(alone.pause(of: "p", now: fixtureNow.adding(seconds: 15))?.until == fixtureNow.adding(seconds: 31))
        alone.failed("p", .timeout, now: fixtureNow.adding(seconds: 62))  // 31 s after the last pause ended
        #expect(alone.pause(of: "p", now: fixtureNow.adding(seconds: 62))?.failures == 1)
        #expect(alone.pause(of: "p", now: fixtureNow.adding(seconds: 63)) == nil, "an outage a minute ago still lengthened the pause")
    }

    /// A provider the board has no room for keeps its pauses in the worker's memory.
    @Test func aProviderWithoutRoomOnTheBoardIsPausedPerWorker() {
        let board = MemoryBoard(room: 0)
        let a = StubProvider("a", .failure(.transport))
        var chain = PausingChain([a], board: board)
        _ = chain.fetch(at: 0)
        #expect(chain.fetch(at: 0).retryAfter == 1 && a.calls == 1)
        _ = chain.fetch(at: 1)
        #expect(chain.cooldowns.pause(of: "a", now: fixtureNow.adding(seconds: 1))?.failures == 2)
        #expect(board.records.isEmpty)
    }

    /// A clock set back (NTP, `date`) must not make a pause outlast the setting; after an HTTP
    /// status, which may carry a `Retry-After` of up to an hour, not that hour.
    @Test func aPauseNeverOutlastsTheLongestWhenTheClockGoesBack() {
        var cooldowns = ProviderCooldowns(longest: 30)
        // Failures in a row, each when the pause before it ended: the last pause is 30 s.
        let start = fixtureNow.adding(seconds: -31)
        for at in [0, 1, 3, 7, 15, 31] as [Int64] { cooldowns.failed("a", .transport, now: start.adding(seconds: at)) }
        cooldowns.failed("b", .httpStatus(429, retryAfter: 30), now: fixtureNow)
        for p in ["a", "b"] {
            #expect(cooldowns.pause(of: p, now: fixtureNow.adding(seconds: 29)) != nil)
            #expect(cooldowns.pause(of: p, now: fixtureNow) != nil)
        }
        #expect(cooldowns.pause(of: "a", now: fixtureNow.adding(seconds: -1)) == nil)
        #expect(cooldowns.pause(of: "a", now: fixtureNow.adding(seconds: -600)) == nil)
        #expect(cooldowns.pause(of: "b", now: fixtureNow.adding(seconds: -1)) == nil, "a Retry-After within the setting")
        // Only a pause a Retry-After made longer than the setting may end up to an hour away.
        cooldowns.failed("c", .httpStatus(429, retryAfter: 600), now: fixtureNow)
        cooldowns.failed("d", .httpStatus(500, retryAfter: nil), now: fixtureNow)
        #expect(cooldowns.pause(of: "c", now: fixtureNow.adding(seconds: -600)) != nil)
        #expect(cooldowns.pause(of: "c", now: fixtureNow.adding(seconds: -3_001)) == nil)
        #expect(cooldowns.pause(of: "d", now: fixtureNow.adding(seconds: -600)) == nil)
    }

    /// A worker with pauses off skips no provider, even one another worker (pauses on) paused
    /// for a long `Retry-After` on the shared page.
    @Test func pausesOffIgnoreASharedLongPause() {
        let board = MemoryBoard()
        var on = ProviderCooldowns(longest: 30, board: board)
        on.failed("vc", .httpStatus(429, retryAfter: 600), now: fixtureNow)
        #expect(on.pause(of: "vc", now: fixtureNow.adding(seconds: 1)) != nil)
        #expect(ProviderCooldowns(longest: 0, board: board).pause(of: "vc", now: fixtureNow.adding(seconds: 1)) == nil)
    }

    /// A call on its way when a 429 began a long pause, failing otherwise (a timeout) after it,
    /// leaves the 429's pause as it was: it replaced the failure, whose shorter bound then took
    /// the pause for a clock gone back, and the provider was called again at once.
    @Test func aShorterFailureDuringALongPauseKeepsIt() {
        var cooldowns = ProviderCooldowns(longest: 30)
        cooldowns.failed("vc", .httpStatus(429, retryAfter: 600), now: fixtureNow)
        cooldowns.failed("vc", .timeout, now: fixtureNow.adding(seconds: 1))
        let pause = cooldowns.pause(of: "vc", now: fixtureNow.adding(seconds: 2))
        #expect(pause?.until == fixtureNow.adding(seconds: 600))
        #expect(pause?.failure == .timeout && pause?.lengthened == true)
    }

    /// Whether a later provider is still paused is decided when the chain reaches it, after the
    /// earlier providers' calls, not at the request's start.
    @Test func aPauseThatEndsDuringAnEarlierCallNoLongerSkips() {
        let a = StubProvider("a", .failure(.timeout)), b = StubProvider("b", .failure(.httpStatus(503, retryAfter: 3)))
        var chain = PausingChain([a, b])
        _ = chain.fetch(at: 0)  // a paused until 1, b (Retry-After 3) until 3
        let clock = chain.clock
        a.duringCall = { clock.current = clock.current.adding(seconds: 4) }
        let outcome = chain.fetch(at: 1)  // a takes 4 s; b's pause ended meanwhile, at 3
        #expect(a.calls == 2 && b.calls == 2)
        #expect(outcome.attempts.map(\.calledProvider) == [true, true])
    }

    /// `pausedOutcome`: an answer without a call only when every provider that could serve the
    /// query is paused; skips for dates do not count; nothing with pauses off.
    @Test func aPausedOutcomeOnlyWhenEveryProviderThatCouldServeIsPaused() {
        let a = StubProvider("a", .failure(.timeout)), b = StubProvider("b", .failure(.transport)), far = StubProvider("far", covers: false)
        var chain = PausingChain([a, far, b])
        let now = fixtureNow
        #expect(chain.chain.pausedOutcome(.forecast(days: 7), now: now, cooldowns: chain.cooldowns) == nil, "nothing paused yet")
        chain.cooldowns.failed("a", .timeout, now: now)
        #expect(chain.chain.pausedOutcome(.forecast(days: 7), now: now, cooldowns: chain.cooldowns) == nil, "b would be called")
        chain.cooldowns.failed("b", .httpStatus(503, retryAfter: 5), now: now)
        let paused = chain.chain.pausedOutcome(.forecast(days: 7), now: now, cooldowns: chain.cooldowns)
        #expect(paused?.result == .failure(.providerError))  // b, the last that could serve, failed with a 503
        #expect(paused?.retryAfter == 1)  // a's pause ends first
        #expect(paused?.attempts.map(\.failure) == [.coolingDown, .notCovered, .coolingDown])
        #expect(paused?.providerCalls == 0)
        #expect(chain.chain.pausedOutcome(.forecast(days: 7), now: now.adding(seconds: 1), cooldowns: chain.cooldowns) == nil, "a's pause is over")
        #expect(a.calls == 0 && b.calls == 0 && far.calls == 0)
        #expect(ProviderChain([a]).pausedOutcome(.forecast(days: 7), now: now, cooldowns: ProviderCooldowns(longest: 0)) == nil)
    }

    @Test func onlyFailuresNoQueryCouldAvoidStartAPause() {
        let everyQuery: [ProviderFailure] = [
            .timeout, .transport, .httpStatus(401, retryAfter: nil), .httpStatus(403, retryAfter: nil),
            .httpStatus(429, retryAfter: 5), .httpStatus(500, retryAfter: nil), .httpStatus(503, retryAfter: nil),
            .httpStatus(301, retryAfter: nil), .httpStatus(308, retryAfter: nil), .notJSON,
        ]
        let thisQuery: [ProviderFailure] = [
            .httpStatus(400, retryAfter: nil), .httpStatus(404, retryAfter: nil), .httpStatus(422, retryAfter: nil),
            .unparseable, .providerError, .notCovered,
        ]
        #expect(everyQuery.filter { !$0.failsEveryQuery }.isEmpty)
        #expect(thisQuery.filter { $0.failsEveryQuery }.isEmpty)
        for failure in thisQuery {
            let a = StubProvider("a", .failure(failure))
            var chain = PausingChain([a])
            let first = chain.fetch(at: 0), second = chain.fetch(at: 0)
            #expect(a.calls == 2, "\(failure) paused the provider")
            #expect(first.retryAfter == nil && second.retryAfter == nil)
        }
    }

    /// A success status with a page that is not JSON (a captive portal, a proxy's or the
    /// provider's maintenance page) answers every query alike: it pauses the provider, and the
    /// next request goes straight to the other one. Through the real providers and the chain.
    @Test func aSuccessPageThatIsNotJSONPausesTheProvider() throws {
        let caiyunTransport = RecordingTransport(body: Array("<html><body>Scheduled maintenance</body></html>".utf8))
        let vcTransport = try RecordingTransport(body: Fixture.bytes(Fixture.vcForecast))
        var chain = PausingChain([
            CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: caiyunTransport, timeoutSeconds: 1),
            VisualCrossingProvider(baseURL: "https://vc.invalid", apiKey: "k", transport: vcTransport, timeoutSeconds: 1),
        ])
        let first = chain.fetch(at: 0)
        #expect(first.attempts.map(\.failure) == [.notJSON, nil])
        let second = chain.fetch(at: 0)
        #expect(second.attempts.map(\.failure) == [.coolingDown, nil])
        #expect(caiyunTransport.urls.count == 1 && vcTransport.urls.count == 2)
        #expect(try second.result.get().provider == "visualcrossing")
    }

    /// Caiyun documents 400 as a bad token or API version (422 is a bad parameter); Visual
    /// Crossing's 400 is a bad date or place. Through the real providers and the chain.
    @Test func caiyunsBadTokenPausesItAndVisualCrossingsBadPlaceDoesNot() {
        let caiyunTransport = RecordingTransport(status: 400, body: Array(#"{"status":"failed","error":"token is invalid"}"#.utf8))
        let vcTransport = RecordingTransport(status: 400, body: Array("Bad API Request:Invalid location parameter value.".utf8))
        var chain = PausingChain([
            CaiyunProvider(baseURL: "https://caiyun.invalid", token: "t", transport: caiyunTransport, timeoutSeconds: 1),
            VisualCrossingProvider(baseURL: "https://vc.invalid", apiKey: "k", transport: vcTransport, timeoutSeconds: 1),
        ])
        _ = chain.fetch(at: 0)
        let second = chain.fetch(at: 0)
        #expect(caiyunTransport.urls.count == 1 && vcTransport.urls.count == 2)
        #expect(second.attempts.map(\.failure) == [.coolingDown, .httpStatus(400, retryAfter: nil)])
        #expect(second.retryAfter == 1)
    }
}
