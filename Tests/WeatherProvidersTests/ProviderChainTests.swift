import Foundation
import Testing
import WeatherCore
import WeatherProviders

/// A provider that answers from a script and counts its calls.
final class StubProvider: WeatherProvider, @unchecked Sendable {
    let name: String
    private let answer: Result<Void, ProviderFailure>
    private let covers: Bool
    private let lock = NSLock()
    private var count = 0

    init(_ name: String, _ answer: Result<Void, ProviderFailure> = .success(()), covers: Bool = true) {
        self.name = name
        self.answer = answer
        self.covers = covers
    }

    var calls: Int { lock.withLock { count } }

    func canCover(_ query: WeatherQuery, now: Timestamp) -> Bool { covers }

    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) throws(ProviderFailure) -> WeatherReport {
        lock.withLock { count += 1 }
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

    @Test func nothingCoveredIsAProviderError() {
        let outcome = run([StubProvider("a", covers: false), StubProvider("b", covers: false)])
        #expect(outcome.result == .failure(.providerError))
        #expect(outcome.providerCalls == 0 && outcome.providerErrors == 0)
        #expect(outcome.attempts.count == 2)
    }

    @Test func notCoveredAfterACallCountsAsAnError() {
        let outcome = run([StubProvider("a", .failure(.notCovered))])
        #expect(outcome.result == .failure(.providerError))
        #expect(outcome.providerCalls == 1 && outcome.providerErrors == 1)
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
        #expect(outcome.attempts == [
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
}
