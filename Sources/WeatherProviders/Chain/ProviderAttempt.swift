/// One provider's part in a chain fetch, for counters and the request's log line.
public struct ProviderAttempt: Sendable, Equatable {
    /// The provider's `name`.
    public var provider: String
    /// `nil` when this provider produced the report.
    public var failure: ProviderFailure?
    /// Whether the provider was actually called. `false` when it was skipped because it cannot
    /// cover the query: such a skip costs nothing and is neither a provider call nor an error.
    public var calledProvider: Bool

    /// Creates an attempt record.
    public init(provider: String, failure: ProviderFailure?, calledProvider: Bool) {
        self.provider = provider
        self.failure = failure
        self.calledProvider = calledProvider
    }

    /// True when this attempt produced the report.
    public var succeeded: Bool { failure == nil }

    /// A call that failed, for the error counters: not one whose answer lacked the dates asked
    /// (a trip near the end of Caiyun's days, which a place's time zone decides), which says
    /// nothing about the provider's health.
    public var calledAndFailed: Bool { calledProvider && failure != nil && failure != .notCovered }
}
