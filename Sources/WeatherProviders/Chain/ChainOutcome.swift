import WeatherCore

/// The result of a chain fetch together with every attempt made on the way.
public struct ChainOutcome: Sendable, Equatable {
    /// The first report, or `.timeout` / `.providerError` (see `ProviderChain.fetch`).
    public var result: Result<WeatherReport, ProviderFailure>
    /// One entry per provider tried or skipped, in chain order.
    public var attempts: [ProviderAttempt]

    /// Creates an outcome.
    public init(result: Result<WeatherReport, ProviderFailure>, attempts: [ProviderAttempt]) {
        self.result = result
        self.attempts = attempts
    }

    /// Provider calls made (skips excluded): what the `stats` provider-call counter adds.
    public var providerCalls: Int { attempts.count(where: \.calledProvider) }

    /// Provider calls that failed: what the `stats` provider-error counter adds.
    public var providerErrors: Int { attempts.count(where: { $0.calledProvider && $0.failure != nil }) }
}
