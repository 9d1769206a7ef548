/// One provider's part in a chain fetch, for counters and the request's log line.
public struct ProviderAttempt: Sendable, Equatable {
    /// The provider's `name`.
    public var provider: String
    /// `nil` when this provider produced the report.
    public var failure: ProviderFailure?
    /// Whether the provider was asked: called, or its answer to the same call moments earlier
    /// judged again (`repeated`). `false` when it was skipped because it cannot cover the query,
    /// is in a pause, or the fetch's time had run out (`outOfTime`): such a skip costs nothing and
    /// is neither a provider call nor an error.
    public var calledProvider: Bool
    /// No request went out: the transport gave the answer to the same call moments earlier
    /// (`RepeatedCallTransport`), judged again for this query. Asked, so its failure is the
    /// provider's answer, not a skip; but no call and no error for the counters, and no pause.
    public var repeated: Bool

    /// Creates an attempt record.
    public init(provider: String, failure: ProviderFailure?, calledProvider: Bool, repeated: Bool = false) {
        self.provider = provider
        self.failure = failure
        self.calledProvider = calledProvider
        self.repeated = repeated
    }

    /// A request went out to the provider: what the call counter counts.
    public var sentRequest: Bool { calledProvider && !repeated }

    /// True when this attempt produced the report.
    public var succeeded: Bool { failure == nil }

    /// The attempt in the request's log line: the failure's code, `ok`, or `repeat` for a report
    /// made from the answer to the same call moments earlier, without a call (a failure judged on
    /// such an answer keeps its own code).
    public var code: String { failure?.code ?? (repeated ? "repeat" : "ok") }

    /// A call that failed, for the error counters: not one whose answer lacked the dates asked
    /// (a trip near the end of Caiyun's days, which a place's time zone decides), which says
    /// nothing about the provider's health, nor one cut short by the fetch's time (`outOfTime`).
    public var calledAndFailed: Bool { sentRequest && failure != nil && failure != .notCovered && failure != .outOfTime }
}
