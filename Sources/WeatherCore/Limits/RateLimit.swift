/// A quota: `limit` requests per `window` seconds.
public struct Quota: Sendable, Equatable {
    public var limit: Int
    public var window: Int64
    public init(limit: Int, window: Int64) {
        self.limit = limit
        self.window = window
    }

    /// A limit of 0 turns the quota off.
    public var isEnabled: Bool { limit > 0 && window > 0 }
}

/// The Generic Cell Rate Algorithm: a token bucket kept as one number per key.
///
/// State is the "theoretical arrival time" (TAT) in milliseconds. Each request advances it by
/// `window / limit`; a request is refused when the TAT would run more than `window` ahead of now.
/// Behaviour at window edges: there are no edges. A full bucket allows `limit` requests at once,
/// then one more every `window / limit`; there is never a double burst at a boundary, because
/// nothing resets at a boundary. `retryAfter` is exactly when the next request will pass.
public enum GCRA {
    /// What one request does to the bucket.
    public struct Decision: Sendable, Equatable {
        public var allowed: Bool
        /// The state to store (unchanged when refused).
        public var newTAT: Int64
        /// Whole seconds until a request would pass, rounded up; 0 when allowed.
        public var retryAfter: Int64
    }

    /// Decides one request at `nowMs` against the stored `tat` (nil: fresh bucket).
    public static func decide(tat: Int64?, nowMs: Int64, quota: Quota) -> Decision {
        let interval = max(1, quota.window * 1000 / Int64(quota.limit))
        let burst = quota.window * 1000
        let base = max(tat ?? nowMs, nowMs)
        let next = base + interval
        if next - nowMs <= burst { return Decision(allowed: true, newTAT: next, retryAfter: 0) }
        let waitMs = next - burst - nowMs
        return Decision(allowed: false, newTAT: tat ?? nowMs, retryAfter: max(1, (waitMs + 999) / 1000))
    }
}
