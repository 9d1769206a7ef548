import WeatherCore

/// What a request learned along the way; travels beside the request, never in globals.
public struct Context: Sendable {
    public var requestId: String
    /// The client as per-IP quotas count it: its address, or for IPv6 its /64 (`ClientAddress.quotaKey`).
    public var clientIP: String
    public var now: Timestamp
    /// Set by authentication.
    public var authMode: AuthMode?
    public var sessionId: String?
    /// For the log line: `hit`, `miss`, `stale`.
    public var cache: String?
    /// For the log line, when providers were asked: `WeatherFetch.trail`, each fetch's in turn.
    public var providers: String?
    /// When the request stops asking providers and waiting for another worker's fetch, in
    /// `MonotonicTime.now()`'s nanoseconds (`WeatherHandler` sets it); `.max`: never.
    public var deadline: UInt64 = .max

    /// Adds a fetch's trail to the log line's: a request that fetched twice (the outlook, then
    /// the days it could not hold) named only its second fetch (a race hunt).
    public mutating func addProviders(_ trail: String?) {
        guard let trail else { return }
        providers = providers.map { "\($0),\(trail)" } ?? trail
    }

    public init(requestId: String, clientIP: String, now: Timestamp) {
        self.requestId = requestId
        self.clientIP = clientIP
        self.now = now
    }
}
