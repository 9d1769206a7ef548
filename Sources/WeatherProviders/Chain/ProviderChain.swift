import WeatherCore

/// Providers in the configured order (`WEATHER_PROVIDERS`), tried one after another.
public struct ProviderChain: Sendable {
    /// The providers, first choice first.
    public let providers: [any WeatherProvider]

    /// Creates a chain; an empty one means no provider is configured (API: 503).
    public init(_ providers: [any WeatherProvider]) {
        self.providers = providers
    }

    /// True when no provider is configured; callers answer `provider_not_configured`.
    public var isEmpty: Bool { providers.isEmpty }

    /// Tries each provider in order and returns the first report with every attempt.
    ///
    /// Providers whose `canCover` is false are skipped without a call. When none succeeds, the
    /// failure is `.timeout` if the last provider actually called timed out (API: 504; with pauses,
    /// also when the last provider is paused after a timeout, and when the fetch's time ran out
    /// before or during the last provider's turn: `outOfTime`), `.notCovered` when every provider
    /// was skipped for the dates (API: 502, but no retry can help), and
    /// `.providerError` otherwise (API: 502), including when the chain is empty. The details of
    /// each failure stay in `attempts` for the log line.
    /// Every failure fails over, 429 included: the next provider has its own quota.
    public func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) -> ChainOutcome {
        var none = ProviderCooldowns(longest: 0)
        return fetch(query, at: point, now: now, cooldowns: &none, clock: FixedClock(now))
    }

    /// `fetch`, skipping providers in a pause after recent failures (`ProviderCooldowns`) and
    /// recording each call's outcome there.
    ///
    /// A provider in a pause is skipped without a call (`.coolingDown`) and stands for its last
    /// failure: if it is the last provider and that failure was a timeout, the chain times out.
    /// Pauses start when this fetch ends (`clock`, read then), not at `now`, the request's time,
    /// nor when each call ended: the worker calls nobody before the fetch is over, and a pause of
    /// 1, 2 or 4 s begun when Caiyun timed out would be used up by Visual Crossing's 4 s timeout.
    /// Whether a provider is in a pause is also asked of `clock`, as the providers before it may
    /// have taken long.
    /// A failed outcome carries `retryAfter` when a pause is running: the seconds from the end of
    /// this fetch until the first of the providers that could serve the query is called again.
    ///
    /// `seconds` bounds the whole fetch: a provider is given no more than what is left of them,
    /// however long its own timeout, and one reached with less than `shortestCall` left is skipped
    /// (no call); either way one that runs out of that time is `.outOfTime`, which pauses nobody,
    /// is no provider error and stands for a timeout (504). The handler passes what is left of
    /// its request's time, so that a request that already waited or fetched once cannot hold its
    /// worker for another full round of timeouts.
    public func fetch(
        _ query: WeatherQuery, at point: GridPoint, now: Timestamp, cooldowns: inout ProviderCooldowns, clock: any Clock,
        within seconds: Double = .infinity
    ) -> ChainOutcome {
        let deadline = MonotonicTime.deadline(after: seconds, from: MonotonicTime.now())
        var attempts: [ProviderAttempt] = []
        var lastFailure: ProviderFailure?
        var tried: [String] = []
        // Failures that pause their provider, recorded when the fetch ends.
        var pausing: [(provider: String, failure: ProviderFailure)] = []
        func recordPauses() -> Timestamp {
            guard cooldowns.longest > 0 else { return now }
            let ended = clock.now()
            for p in pausing { cooldowns.failed(p.provider, p.failure, now: ended) }
            cooldowns.releaseClaims()  // those no call settled
            return ended
        }
        if cooldowns.longest > 0 {
            cooldowns.admitAll(providers.filter { $0.canCover(query, now: now) }.map(\.name), now: clock.now())
        }
        for provider in providers {
            guard provider.canCover(query, now: now) else {
                attempts.append(ProviderAttempt(provider: provider.name, failure: .notCovered, calledProvider: false))
                continue
            }
            tried.append(provider.name)
            // The clock, not `now`: an earlier provider's call may have taken seconds.
            if let pause = cooldowns.admit(provider.name, now: cooldowns.longest > 0 ? clock.now() : now) {
                attempts.append(ProviderAttempt(provider: provider.name, failure: .coolingDown, calledProvider: false))
                lastFailure = pause.failure
                continue
            }
            // After the pause: a provider in one says so, and stands for its failure, whatever
            // the time. A claim `admit` gave for testing this provider goes back unused
            // (`recordPauses`).
            let left = MonotonicTime.seconds(until: deadline, from: MonotonicTime.now())
            guard left >= Self.shortestCall else {
                attempts.append(ProviderAttempt(provider: provider.name, failure: .outOfTime, calledProvider: false))
                lastFailure = .timeout
                continue
            }
            // An answer given again (`ProviderCall.repeated`) is the provider's answer, but no
            // call: it neither ends a pause nor starts or lengthens one (the call that brought it
            // did what it does), and the counters count neither a call nor an error for it.
            let call = provider.call(query, at: point, now: now, within: left)
            switch call.result {
            case .success(let report):
                if !call.repeated { cooldowns.succeeded(provider.name) }
                _ = recordPauses()
                attempts.append(ProviderAttempt(provider: provider.name, failure: nil, calledProvider: true, repeated: call.repeated))
                return ChainOutcome(result: .success(report), attempts: attempts)
            case .failure(let error):
                // Only a failure no query could avoid pauses the provider: what one client asks
                // must not stop the gateway asking it for everyone.
                if !call.repeated && provider.failsEveryQuery(error) { pausing.append((provider.name, error)) }
                attempts.append(ProviderAttempt(provider: provider.name, failure: error, calledProvider: true, repeated: call.repeated))
                lastFailure = error == .outOfTime ? .timeout : error
            }
        }
        // Only when nobody was asked: a provider that answered without some of the days (its day
        // not turned yet, just after the place's midnight) may well have them when asked again,
        // and `.notCovered` tells the client that asking again will not help (a contract audit).
        let failure: ProviderFailure =
            if !attempts.isEmpty && attempts.allSatisfy({ $0.failure == .notCovered && !$0.calledProvider }) {
                .notCovered
            } else {
                lastFailure == .timeout ? .timeout : .providerError
            }
        let ended = recordPauses()
        let resumes = tried.compactMap { cooldowns.pause(of: $0, now: ended)?.until.seconds }.min()
        return ChainOutcome(result: .failure(failure), attempts: attempts, retryAfter: resumes.map { max(1, $0 - ended.seconds) })
    }
}

extension ProviderChain {
    /// The least time a provider is asked with: the shortest `WEATHER_PROVIDER_TIMEOUT`.
    public static let shortestCall = 0.1

    /// What `fetch` would answer without calling anyone, when every provider that could serve
    /// `query` is in a pause at `now`: the last one's failure and the seconds until the first
    /// pause ends. `nil` when some provider would be called (or none could serve the query), so
    /// the caller fetches as usual. Lets a worker answer an outage without taking a fetch lock.
    public func pausedOutcome(_ query: WeatherQuery, now: Timestamp, cooldowns: ProviderCooldowns) -> ChainOutcome? {
        guard cooldowns.longest > 0 else { return nil }
        var attempts: [ProviderAttempt] = []
        var last: ProviderFailure?
        var resumes = Int64.max
        for provider in providers {
            guard provider.canCover(query, now: now) else {
                attempts.append(ProviderAttempt(provider: provider.name, failure: .notCovered, calledProvider: false))
                continue
            }
            guard let pause = cooldowns.pause(of: provider.name, now: now) else { return nil }
            attempts.append(ProviderAttempt(provider: provider.name, failure: .coolingDown, calledProvider: false))
            last = pause.failure
            resumes = min(resumes, pause.until.seconds)
        }
        guard let last else { return nil }
        return ChainOutcome(
            result: .failure(last == .timeout ? .timeout : .providerError), attempts: attempts,
            retryAfter: max(1, resumes - now.seconds))
    }
}

/// A clock that always says the same time: for a chain without pauses, where its time is unused.
private struct FixedClock: Clock {
    let time: Timestamp
    init(_ time: Timestamp) { self.time = time }
    func now() -> Timestamp { time }
}
