import WeatherCore

/// The six quotas of API.md as named buckets, checked against state shared by every worker.
struct Limiter {
    let store: any GatewayStore
    let limits: LimitSettings
    let metrics: Metrics

    private func hourly(_ limit: Int) -> Quota { Quota(limit: limit, window: limits.hourWindow) }

    func sessionCreation(ip: String) -> LimitBucket { LimitBucket(key: "create_ip:\(ip)", quota: hourly(limits.sessionCreatePerIPPerHour)) }
    func refresh(sessionId: String) -> LimitBucket { LimitBucket(key: "refresh_session:\(sessionId)", quota: hourly(limits.refreshPerSessionPerHour)) }
    func weather(sessionId: String) -> LimitBucket { LimitBucket(key: "weather_session:\(sessionId)", quota: hourly(limits.requestsPerSessionPerHour)) }
    func weather(ip: String) -> LimitBucket { LimitBucket(key: "weather_ip:\(ip)", quota: hourly(limits.requestsPerIPPerHour)) }
    func legacy(ip: String) -> LimitBucket { LimitBucket(key: "legacy_ip:\(ip)", quota: hourly(limits.legacyRequestsPerIPPerHour)) }
    var cellQuota: Quota { Quota(limit: limits.gridCellsPerSessionPerDay, window: limits.dayWindow) }

    /// Takes one request from each bucket or throws 429 with the wait of the bucket that refused.
    func check(_ buckets: [LimitBucket], context: Context) throws(HTTPError) {
        let verdict: LimitVerdict
        do { verdict = try store.consume(buckets, nowMs: context.now.seconds * 1000) } catch { throw .storageUnavailable }
        try enforce(verdict, context: context)
    }

    /// The distinct-cell quota of a session.
    func checkCell(_ cell: String, sessionId: String, context: Context) throws(HTTPError) {
        let verdict: LimitVerdict
        do { verdict = try store.admitCell(cell, sessionId: sessionId, quota: cellQuota, nowMs: context.now.seconds * 1000) } catch { throw .storageUnavailable }
        try enforce(verdict, context: context)
    }

    private func enforce(_ verdict: LimitVerdict, context: Context) throws(HTTPError) {
        if case .refused(let retryAfter, let bucket) = verdict {
            metrics.count(Counters.Name.limited(String(bucket.prefix { $0 != ":" })), at: context.now)
            throw .rateLimited(retryAfter: retryAfter)
        }
    }
}
