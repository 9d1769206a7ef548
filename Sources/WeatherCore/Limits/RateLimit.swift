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
        let t = take(tat: tat, nowMs: nowMs, quota: quota, upTo: 1)
        return Decision(allowed: t.granted > 0, newTAT: t.newTAT, retryAfter: t.retryAfter)
    }

    /// What taking units ahead of time does to the bucket.
    public struct Take: Sendable, Equatable {
        /// Units taken: 0 (refused), 1, or `upTo` when the bucket had room for it many times over.
        public var granted: Int
        public var newTAT: Int64
        public var retryAfter: Int64
    }

    /// A lease is at most this fraction of the bucket's free units (1/8), so a lease is only taken
    /// from a bucket so far from empty that no other worker is refused meanwhile.
    public static let leaseHeadroom: Int64 = 8
    /// No lease smaller than this: a bucket with less room than `leaseHeadroom × minimumLease`
    /// is served one unit at a time, exactly as without leases.
    public static let minimumLease: Int64 = 65

    /// Takes one unit, or a lease of up to `upTo` units (at most an eighth of the free units, and
    /// only when that is at least `minimumLease`) for requests the worker will serve in the next
    /// moment. Refuses, with the truthful wait, only when not even one unit is free, so asking
    /// for a lease never refuses a request.
    public static func take(tat: Int64?, nowMs: Int64, quota: Quota, upTo wanted: Int) -> Take {
        let interval = max(1, quota.window * 1000 / Int64(quota.limit))
        let burst = quota.window * 1000
        let base = max(plausible(tat, nowMs: nowMs, burst: burst) ?? nowMs, nowMs)
        let room = burst - (base - nowMs)
        guard room >= interval else {
            let waitMs = base + interval - burst - nowMs
            return Take(granted: 0, newTAT: tat ?? nowMs, retryAfter: max(1, (waitMs + 999) / 1000))
        }
        let affordable = room / interval / leaseHeadroom
        let n: Int64 = wanted > 1 && affordable >= minimumLease ? min(Int64(wanted), affordable) : 1
        return Take(granted: Int(n), newTAT: base + n * interval, retryAfter: 0)
    }

    /// The state after `units` taken ahead were not used after all: as if they had never been
    /// taken, except that a bucket never becomes fuller than full.
    public static func giveBack(tat: Int64, units: Int, nowMs: Int64, quota: Quota) -> Int64 {
        let interval = max(1, quota.window * 1000 / Int64(quota.limit))
        guard let tat = plausible(tat, nowMs: nowMs, burst: quota.window * 1000) else { return nowMs }
        return max(nowMs, tat - Int64(units) * interval)
    }

    /// A stored TAT no take could have written by this clock: a take leaves it at most one
    /// window ahead of its now, so one further ahead (by more than a minute) was written under a clock since set back
    /// (a VM resumed, a clock stepped by hand). Such a bucket counts as full again, as a pause
    /// or a fetch claim from a clock set back counts as ended; kept, it refused every request
    /// with a `Retry-After` of the step, weeks after a month's step (a black-box clock test).
    ///
    /// A minute's slack: a request's `now` is taken when it arrives, and one that arrived a few
    /// seconds before a take it races (a slow body) must not find the bucket it emptied "full
    /// again" (a review found a one-second-older request got a whole new burst).
    ///
    /// A TAT not after now is a full bucket too (nil): what the callers make of it anyway, and
    /// no arithmetic then meets a value near `Int64.min` from a damaged or hand-edited row (a
    /// failure-path audit: giving a lease back subtracted from it and trapped, after every response).
    static func plausible(_ tat: Int64?, nowMs: Int64, burst: Int64) -> Int64? {
        guard let tat, tat > nowMs, tat <= nowMs + burst + Timestamp.slackSeconds * 1000 else { return nil }
        return tat
    }
}
