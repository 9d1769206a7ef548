/// The lifetimes a freshly issued pair gets, computed from one `now`.
public struct TokenLifetimes: Sendable, Equatable {
    public var issuedAt: Timestamp
    public var accessExpiresAt: Timestamp
    public var refreshAfter: Timestamp
    public var refreshExpiresAt: Timestamp

    public init(now: Timestamp, policy: TokenPolicy) {
        issuedAt = now
        accessExpiresAt = now.adding(seconds: policy.accessTTL)
        refreshAfter = now.adding(seconds: policy.refreshAfter)
        refreshExpiresAt = now.adding(seconds: policy.refreshTTL)
    }

    /// The same lifetimes for a pair issued at `t` instead (a retried refresh answers with the
    /// deadlines of the pair it issued the first time).
    public func issued(at t: Timestamp) -> TokenLifetimes {
        let d = t.seconds - issuedAt.seconds
        var out = self
        out.issuedAt = t
        out.accessExpiresAt = accessExpiresAt.adding(seconds: d)
        out.refreshAfter = refreshAfter.adding(seconds: d)
        out.refreshExpiresAt = refreshExpiresAt.adding(seconds: d)
        return out
    }
}
