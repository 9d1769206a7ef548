/// Where the workers of one machine keep the pauses of failing providers (`ProviderCooldowns`),
/// so that a provider one worker found dead is not called by the next worker a moment later,
/// and a request waiting for another worker's fetch learns why that fetch failed.
///
/// One `ProviderPause` per provider name, each replaced in one atomic step. A board may have
/// room for a few providers only: `update` says when it had none, and the caller keeps that
/// provider's pauses to itself.
public protocol ProviderPauseBoard: AnyObject, Sendable {
    /// The record of `provider`, running or not; nil when there is none.
    func pause(of provider: String) -> ProviderPause?

    /// Replaces the record of `provider` with `change(current record)`, nil clearing it, as one
    /// atomic step: when another worker changed it meanwhile, `change` is asked again with the
    /// new record. False when the board has no room for `provider` (nothing was recorded).
    @discardableResult
    func update(_ provider: String, _ change: (ProviderPause?) -> ProviderPause?) -> Bool
}

/// One provider's failures in a row and the end of its pause.
public struct ProviderPause: Sendable, Equatable {
    /// Failures in a row, counted by every worker together, up to `mostFailures`.
    public var failures: Int
    /// Where the count of failures stops (a board keeps it in a byte).
    public static let mostFailures = 255
    /// When the pause ends, in whole seconds.
    public var until: Timestamp
    /// The last failure, in the pauses' own 24-bit encoding (`ProviderCooldowns`).
    public var failure: UInt32

    public init(failures: Int, until: Timestamp, failure: UInt32) {
        self.failures = failures
        self.until = until
        self.failure = failure
    }
}
