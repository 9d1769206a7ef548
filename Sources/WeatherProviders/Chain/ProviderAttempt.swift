/// One provider's part in a chain fetch, for counters and the request's log line.
public struct ProviderAttempt: Sendable, Equatable {
    /// The provider's `name`.
    public var provider: String
    /// `nil` when this provider produced the report.
    public var failure: ProviderFailure?
    /// Whether the provider was actually called. `false` when it was skipped because it cannot
    /// cover the query, or answered from its answer to the same call moments earlier
    /// (`RepeatedCallTransport`): that costs nothing and is neither a provider call nor an error.
    public var calledProvider: Bool

    /// Creates an attempt record.
    public init(provider: String, failure: ProviderFailure?, calledProvider: Bool) {
        self.provider = provider
        self.failure = failure
        self.calledProvider = calledProvider
    }

    /// True when this attempt produced the report.
    public var succeeded: Bool { failure == nil }

    /// The attempt in the request's log line: the failure's code, `ok`, or `repeat` for a report
    /// made from the answer to the same call moments earlier, without a call.
    public var code: String { failure?.code ?? (calledProvider ? "ok" : "repeat") }

    /// A call that failed, for the error counters: not one whose answer lacked the dates asked
    /// (a trip near the end of Caiyun's days, which a place's time zone decides), which says
    /// nothing about the provider's health.
    public var calledAndFailed: Bool { calledProvider && failure != nil && failure != .notCovered }
}
