import WeatherCore

/// Where fresh weather comes from: the provider chain in production, a fake in tests.
public protocol WeatherSource {
    /// False when no provider has a key: weather routes answer 503 `provider_not_configured`.
    var isConfigured: Bool { get }
    /// Longest time one `fetch` may take, in seconds (every provider's timeout together).
    var worstCaseSeconds: Double { get }
    /// Asks the providers for `query` at the snapped `point` in at most `seconds` (what is left of
    /// the request's time; `worstCaseSeconds` or more leaves every provider its own timeout): the
    /// report or why there is none, with each provider's attempt for the counters and the log.
    /// Given less than `ProviderChain.shortestCall`, it calls nobody and fails as a timeout, each
    /// provider `out_of_time` in the trail (but one in a pause `cooling_down`, standing for its
    /// failure: a 502 when that was not a timeout).
    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> WeatherFetch
    /// The failed fetch `fetch` would return without calling anyone, because every provider that
    /// could serve `query` is in a pause after failing; `nil` when a call would be made.
    func pausedFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch?
    /// The failed fetch `fetch` would return without calling anyone because no provider could
    /// serve `query`'s days (each would skip it); `nil` when one could.
    func uncoveredFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch?
}

extension WeatherSource {
    /// Sources without pauses always call.
    public func pausedFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch? { nil }
    /// Sources that cannot tell cover everything; their fetch says otherwise.
    public func uncoveredFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch? { nil }
}

/// The outcome of asking the providers, with every call made, for the counters.
public struct WeatherFetch {
    public enum Failure: Error, Equatable {
        case timeout
        case providerError
        /// No provider covers the days asked (a trip further ahead than the configured providers
        /// forecast): asking again cannot help.
        case notCovered
    }

    public var result: Result<WeatherReport, Failure>
    /// Provider name and whether that call failed, in order; calls skipped without a network call are absent.
    public var attempts: [(provider: String, failed: Bool)]
    /// On a failure: seconds until a provider in a pause after failing is called again (the
    /// answer's `Retry-After`); `nil` when none is.
    public var retryAfter: Int64?
    /// For the request's log line: each provider asked or skipped with how it went, as
    /// `caiyun:timeout,visualcrossing:ok` (codes of `ProviderFailure`, never a URL or a body).
    public var trail: String?

    public init(result: Result<WeatherReport, Failure>, attempts: [(provider: String, failed: Bool)], retryAfter: Int64? = nil, trail: String? = nil) {
        self.result = result
        self.attempts = attempts
        self.retryAfter = retryAfter
        self.trail = trail
    }
}
