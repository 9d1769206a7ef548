import WeatherCore

/// Per-hour counters kept in memory and flushed in one transaction every few seconds, so counting
/// costs no write on the request path.
public struct Counters {
    /// Counts of hours before the current one (rare: only across an hour boundary).
    private var earlier: [CounterKey: Int64] = [:]
    /// Counts of the current hour, in the order their names first came. A request counts two or
    /// three names of a few dozen (mostly the same literals), so a search from the front beats
    /// hashing each name (two hashes were about 1,800 instructions of a cached request).
    private var current: [(name: String, count: Int64)] = []
    private var hourIndex: Int64 = .min
    private var hourLabel = ""

    /// No counts yet.
    public init() {}

    /// Everything not yet drained.
    public var pending: [CounterKey: Int64] {
        var all = earlier
        for (name, n) in current { all[CounterKey(hour: hourLabel, name: name), default: 0] += n }
        return all
    }

    /// Adds `n` to `name` in the hour of `t`.
    public mutating func add(_ name: String, at t: Timestamp, _ n: Int64 = 1) {
        let index = t.seconds >= 0 ? t.seconds / 3600 : (t.seconds - 3599) / 3600
        if index != hourIndex {
            for (old, count) in current { earlier[CounterKey(hour: hourLabel, name: old), default: 0] += count }
            current.removeAll(keepingCapacity: true)
            hourIndex = index
            hourLabel = CounterKey.hour(of: t)
        }
        let length = name.utf8.count
        if let i = current.firstIndex(where: { $0.name.utf8.count == length && $0.name == name }) {
            current[i].count += n
        } else {
            current.append((name, n))
        }
    }

    /// Everything counted so far, leaving nothing (a failed write adds it back).
    public mutating func drain() -> [CounterKey: Int64] {
        defer {
            earlier = [:]
            current.removeAll(keepingCapacity: true)
        }
        return pending
    }

    /// Names used in `weather_counters.name` (and by `weatherctl stats`).
    public enum Name {
        /// Weather requests by the `authMode` they proved.
        public static func auth(_ mode: AuthMode) -> String {
            switch mode {  // literals: these run on every weather request
            case .weatherSession: return "auth.weather_session"
            case .weatherToken: return "auth.weather_token"
            }
        }
        /// Answers with HTTP status `code` (401 and 429 are counted).
        public static func status(_ code: Int) -> String { "status.\(code)" }
        /// Sessions created.
        public static let sessionsCreated = "sessions.created"
        /// Refresh tokens spent for a new pair.
        public static let refreshes = "sessions.refreshed"
        /// Retries of a refresh inside the retry window, answered with the same pair.
        public static let refreshRetries = "sessions.refresh_retried"
        /// Spent refresh tokens presented again (the session is revoked).
        public static let refreshReuse = "sessions.refresh_reused"
        /// Sessions the app revoked itself.
        public static let revokes = "sessions.revoked"
        /// Weather answers by their `cache` state (`hit`, `miss`, `stale`, `stale_refreshing`).
        public static func cache(_ state: String) -> String {
            switch state {
            case "hit": return "cache.hit"
            case "miss": return "cache.miss"
            case "stale": return "cache.stale"
            case "stale_refreshing": return "cache.stale_refreshing"
            default: return "cache.\(state)"
            }
        }
        /// Calls made to provider `p`.
        public static func providerCall(_ p: String) -> String { "provider.\(p).calls" }
        /// Calls to provider `p` that failed.
        public static func providerError(_ p: String) -> String { "provider.\(p).errors" }
        /// 429s by the quota that refused them.
        public static func limited(_ limit: String) -> String { "limited.\(limit)" }
        /// Refreshes refused with `invalid_refresh_token` by why (`GatewayStore.refreshRefusal`).
        public static func refreshRefused(_ reason: String) -> String { "refresh_refused.\(reason)" }
        /// 401s of the weather routes by `AuthRefusal`.
        public static func unauthorized(_ reason: String) -> String { "unauthorized.\(reason)" }
        /// Answers of 500 or more by their error code (`storage_unavailable`, `provider_error` …).
        public static func serverError(_ code: String) -> String { "status.5xx.\(code)" }
    }
}
