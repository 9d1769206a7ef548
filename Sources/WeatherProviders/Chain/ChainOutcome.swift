import WeatherCore

/// The result of a chain fetch together with every attempt made on the way.
public struct ChainOutcome: Sendable, Equatable {
    /// The first report, or `.timeout` / `.notCovered` / `.providerError` (see `ProviderChain.fetch`).
    public var result: Result<WeatherReport, ProviderFailure>
    /// One entry per provider tried or skipped, in chain order.
    public var attempts: [ProviderAttempt]
    /// On a failure while providers are in a pause (`ProviderCooldowns`): seconds until the
    /// first of them is called again, for the answer's `Retry-After`. `nil` otherwise.
    public var retryAfter: Int64?

    /// Creates an outcome.
    public init(result: Result<WeatherReport, ProviderFailure>, attempts: [ProviderAttempt], retryAfter: Int64? = nil) {
        self.result = result
        self.attempts = attempts
        self.retryAfter = retryAfter
    }

    /// Provider calls made (skips excluded): what the `stats` provider-call counter adds.
    public var providerCalls: Int { attempts.count(where: \.sentRequest) }

    /// Provider calls that failed: what the `stats` provider-error counter adds. An answer
    /// without the dates asked (`.notCovered`) is not one: the provider did what it offers.
    public var providerErrors: Int { attempts.count(where: \.calledAndFailed) }
}
