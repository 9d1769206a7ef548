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
    /// failure is `.timeout` if the last provider actually called timed out (API: 504), and
    /// `.providerError` otherwise (API: 502), including when every provider was skipped or the
    /// chain is empty. The details of each failure stay in `attempts` for the log line.
    /// Every failure fails over, 429 included: the next provider has its own quota.
    public func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) -> ChainOutcome {
        var attempts: [ProviderAttempt] = []
        var lastCalledFailure: ProviderFailure?
        for provider in providers {
            guard provider.canCover(query, now: now) else {
                attempts.append(ProviderAttempt(provider: provider.name, failure: .notCovered, calledProvider: false))
                continue
            }
            do {
                let report = try provider.fetch(query, at: point, now: now)
                attempts.append(ProviderAttempt(provider: provider.name, failure: nil, calledProvider: true))
                return ChainOutcome(result: .success(report), attempts: attempts)
            } catch {
                attempts.append(ProviderAttempt(provider: provider.name, failure: error, calledProvider: true))
                lastCalledFailure = error
            }
        }
        let failure: ProviderFailure = lastCalledFailure == .timeout ? .timeout : .providerError
        return ChainOutcome(result: .failure(failure), attempts: attempts)
    }
}
