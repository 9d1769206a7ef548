import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// The gateway: parses, routes, authenticates and answers one request at a time, and writes one
/// log line per request. One instance per worker process.
public final class Gateway {
    public let config: GatewayConfig
    let store: any GatewayStore
    let clock: any Clock
    let log: any LogSink
    public let metrics: Metrics
    private let router: Router
    let limiter: Limiter
    /// The weather routes' handler (tests set its `midnightSpread`).
    let weatherHandler: WeatherHandler
    private var requestCounter: UInt64 = 0
    private let requestIdPrefix: String
    /// The log line's `ts` for the second it was made in: a worker's requests mostly come many
    /// to a second, and writing the text for each was about 650 instructions of a cached
    /// request's 58,000 (callgrind, session 29).
    private var loggedSecond: (seconds: Int64, text: String)?

    /// Wires the handlers. `hashKey` is the server key for installation ids and refresh successors;
    /// `weather` answers the weather routes (nil: 503 `provider_not_configured`).
    public init(
        config: GatewayConfig, store: any GatewayStore, hashKey: [UInt8], clock: any Clock,
        log: any LogSink, weather: (any WeatherSource)? = nil, requestIdPrefix: String
    ) {
        self.config = config
        self.store = store
        self.clock = clock
        self.log = log
        self.requestIdPrefix = requestIdPrefix
        let metrics = Metrics(flushInterval: config.flushInterval)
        self.metrics = metrics
        let minter = TokenMinter(hashKey: hashKey)
        let limiter = Limiter(store: store, limits: config.limits, metrics: metrics, hashKey: hashKey)
        self.limiter = limiter
        let sessions = SessionServices(store: store, minter: minter, config: config, limiter: limiter, metrics: metrics)
        let auth = Authenticator(store: store, minter: minter, legacyToken: config.legacyToken)
        let weatherHandler = WeatherHandler(config: config, auth: auth, limiter: limiter, metrics: metrics, store: store, source: weather, clock: clock)
        self.weatherHandler = weatherHandler

        var router = Router()
        router.add("GET", "/v1/health", HealthHandler(store: store))
        router.add("GET", "/openapi.json", OpenAPIHandler())
        router.add("POST", "/v1/weather/session", CreateSessionHandler(services: sessions))
        router.add("POST", "/v1/weather/session/refresh", RefreshSessionHandler(services: sessions))
        router.add("POST", "/v1/weather/session/revoke", RevokeSessionHandler(services: sessions))
        router.add("GET", "/v1/weather", weatherHandler.forecast)
        router.add("GET", "/v1/weather/trip", weatherHandler.trip)
        self.router = router
    }

    /// Answers one request described by CGI/FastCGI parameters. Never throws: every failure is a
    /// JSON error response.
    public func handle(params: CGIParameters, readBody: (Int) -> [UInt8]) -> Response {
        let started = MonotonicTime.now()
        let now = clock.now()
        requestCounter &+= 1
        // The request id and the method come from the parameters as they are, not from
        // `Request.parse`: a request it refuses (400, 413) still gets its id echoed and its
        // line in the log. The client's address, which only the handlers use, is worked out
        // here with them, from the parameters alone.
        let clientId = Self.acceptableRequestId(params["HTTP_X_REQUEST_ID"])
        let requestId = clientId ?? "\(requestIdPrefix)-\(requestCounter)"
        // Only the log line depends on the legacy token: a client's id holding it is logged as
        // ours, and answered as sent (its own words), so the answer says nothing of the token.
        // Until session 35 such an id was answered with ours: a health request with a 128-byte id
        // tested a hundred guesses of the token, with no 401 and no counter (a privacy audit).
        let loggedRequestId =
            if let clientId, Self.holdsLegacyToken(clientId, config.legacyToken) { "\(requestIdPrefix)-\(requestCounter)" } else { requestId }
        let clientIP = ClientAddress.quotaKey(
            remoteAddr: params["REMOTE_ADDR"] ?? "", forwardedFor: params["HTTP_X_FORWARDED_FOR"], trusted: config.trustedProxies)
        var context = Context(requestId: requestId, clientIP: clientIP, now: now)

        var route = "-"
        let method = Self.loggedMethod(params["REQUEST_METHOD"])
        var response: Response
        var storageFailed = false
        var refused: String?
        var errorCode: String?
        do throws(HTTPError) {
            let request = try Request.parse(params: params, mountPrefix: config.mountPrefix, readBody: readBody)
            response = try router.respond(to: request, context: &context, route: &route)
        } catch {
            response = error.response
            storageFailed = error.code == HTTPError.storageUnavailable.code
            refused = error.reason
            errorCode = error.code
        }
        Self.addHeadersOfEveryAnswer(to: &response, requestId: requestId)

        if response.status == 401 || response.status == 429 { metrics.count(Counters.Name.status(response.status), at: now) }
        // The weather routes' 401s by why; a refresh's are counted by its handler, apart.
        if response.status == 401, let refused, errorCode == HTTPError.unauthorized.code { metrics.count(Counters.Name.unauthorized(refused), at: now) }
        // Kept in memory until a flush succeeds: a full disk's 503s show once it has room again, if
        // this worker is still running then (a CGI process or a worker that ends meanwhile loses them).
        if response.status >= 500 { metrics.count(Counters.Name.serverError(errorCode ?? "http_\(response.status)"), at: now) }
        let ts: String
        if let kept = loggedSecond, kept.seconds == now.seconds {
            ts = kept.text
        } else {
            ts = now.iso8601
            loggedSecond = (now.seconds, ts)
        }
        var line = LogLine()
        line.addPlain("ts", ts)
        line.addPlain("request_id", loggedRequestId)  // checked by acceptableRequestId and for the legacy token, or ours
        line.addPlain("worker", requestIdPrefix)
        line.addPlain("method", method)  // `loggedMethod`: a name of HTTP's or `other`
        line.addPlain("route", route)  // a route of the router, or "-"
        line.addPlain("status", String(response.status))
        line.addMilliseconds("duration_ms", microseconds: MonotonicTime.microseconds(since: started))
        line.addPlain("auth", context.authMode?.rawValue)
        line.addPlain("cache", context.cache)
        line.addPlain("providers", context.providers)
        line.addPlain("refused", refused)  // a fixed word: the quota of a 429, why a 401
        // The session a quota refused, so that an operator can find and revoke one that scans the
        // globe or hammers the API (an incident drill found no way to); an id, never a token.
        if response.status == 429 { line.addPlain("session", context.sessionId) }
        if storageFailed { line.add("storage_error", store.lastFailure?.message) }
        // A request held up behind someone's write transaction says so: an 8 s `duration_ms`
        // was otherwise unexplained (an incident drill).
        let waited = store.takeWriteWaitMs()
        if waited >= Self.loggedWriteWaitMs { line.addPlain("db_wait_ms", String(waited)) }
        line.write(to: log)
        return response
    }

    /// Work that must not delay a response: flushing counters and session touches, giving back
    /// the unused part of ended limit leases (all of them with `force`, when stopping, which also
    /// waits for the store's housekeeping to end), and the clean-up when it is due. Returns
    /// whether this call ran the clean-up (the caller may give its memory back).
    @discardableResult
    public func afterResponse(force: Bool = false) -> Bool {
        let now = clock.now()
        if let flushed = metrics.flushIfDue(to: store, now: now, force: force) {
            noteCounterFlush(flushed, now: now)
            noteDatabaseFile(now: now)  // at each flush: a `stat` every WEATHER_FLUSH_INTERVAL
            noteSharedRateBuckets(now: now)
        }
        limiter.returnLeases(nowMs: now.seconds * 1000, all: force)
        let cleaned = cleanUpIfDue(now: now)
        store.afterResponse()  // last: it also starts the write-wait count again (`db_wait_ms`)
        if force { store.finishHousekeeping() }
        return cleaned
    }

    /// True while the counters' writes fail: one line when they start failing, one when they are
    /// written again (a drill found a damaged counters table refusing every flush, silently).
    private var countersFailing = false

    private func noteCounterFlush(_ flushed: Metrics.FlushState, now: Timestamp) {
        switch flushed {
        case .failed(let error) where !countersFailing:
            countersFailing = true
            var line = workerLine(now: now)
            line.addPlain("counters", "not_written")  // kept in memory, tried at every flush
            line.add("storage_error", error.message)
            log.write(line.text)
        case .written where countersFailing:
            countersFailing = false
            var line = workerLine(now: now)
            line.addPlain("counters", "written_again")
            log.write(line.text)
        default:
            break
        }
    }

    /// The start of a line about this worker rather than a request: its time and the worker.
    private func workerLine(now: Timestamp) -> LogLine {
        var line = LogLine()
        line.addPlain("ts", now.iso8601)
        line.addPlain("worker", requestIdPrefix)
        return line
    }

    /// Said once: the database file was deleted or moved under this worker (a disaster-recovery
    /// drill found only `/v1/health`'s 503 telling, and the documented next steps lost the data).
    private var databaseGoneSaid = false

    private func noteDatabaseFile(now: Timestamp) {
        guard !databaseGoneSaid, store.databaseFileIsGone else { return }
        databaseGoneSaid = true
        var line = workerLine(now: now)
        line.addPlain("database", "gone")
        line.add("detail", "deleted or moved under the running workers; do not restart them (INSTALL.md: A deleted database)")
        log.write(line.text)
    }

    /// A worker that started without the shared rate table (no room on the disk then; it said so
    /// at start) tries again at each flush, and says when it has it: until then each take of a
    /// quota was a write.
    private func noteSharedRateBuckets(now: Timestamp) {
        guard store.retrySharedRateBuckets() else { return }
        var line = workerLine(now: now)
        line.addPlain("rate_buckets", "shared_table")
        line.add("detail", "the disk had room again: quotas are counted in the table the workers share, not in the database")
        log.write(line.text)
    }

    /// A worker's clean stop, after its last `afterResponse(force: true)`: the store leaves
    /// everything in the database file (`GatewayStore.closeForStop`).
    public func stop() { store.closeForStop() }

    /// The shortest wait for the right to write that a request's log line reports (`db_wait_ms`).
    static let loggedWriteWaitMs: Int64 = 100

    /// When this worker next asks whether the clean-up is due (unix seconds; 0: at its first
    /// response). Between looks the question costs nothing; a look is one read.
    private var nextCleanUpLook: Int64 = 0
    static let cleanUpLookInterval: Int64 = 3600
    /// How long one clean-up may spend deleting from the session tables (this worker serves
    /// nobody meanwhile; reading them whole takes about 1.2 s a million sessions besides); what
    /// is left waits for the next look. Measured (bench/cleanup.sh): a walk of a million
    /// sessions with nothing to delete takes about 1.2 s; deleting half of them, about a minute.
    static let cleanUpWalkLimitMs: Int64 = 3000

    /// `weatherctl prune`'s clean-up, run here when no worker and no `weatherctl prune` ran one
    /// for `WEATHER_PRUNE_INTERVAL` seconds: a shared host has no timer and often no cron, and
    /// the privacy notice promises the daily deletions. Each worker looks at its first response
    /// and then hourly (a CGI process at its one request); one line says what was deleted.
    func cleanUpIfDue(now: Timestamp) -> Bool {
        let interval = config.pruneInterval
        guard interval > 0, now.seconds >= nextCleanUpLook || now.seconds < nextCleanUpLook - Self.cleanUpLookInterval else { return false }
        nextCleanUpLook = now.seconds + Self.cleanUpLookInterval
        let started = MonotonicTime.now()
        var line = workerLine(now: now)
        do throws(StoreError) {
            var policy = PrunePolicy(config: config)
            policy.walkTimeLimitMs = Self.cleanUpWalkLimitMs
            guard let report = try store.pruneIfDue(now: now, interval: interval, policy: policy) else { return false }
            line.addPlain("clean_up", report.complete ? "done" : "partial")  // partial: more at the next look
            if !report.dueAgainAtNextLook { line.addPlain("next_look", "not_recorded") }  // the rest waits an interval
            line.addMilliseconds("duration_ms", microseconds: MonotonicTime.microseconds(since: started))
            line.addPlain("deleted", String(report.tables.reduce(0) { $0 + $1.rows }))
            for t in report.tables { line.addPlain(t.table, String(t.rows)) }
        } catch {
            line.addPlain("clean_up", "failed")
            line.add("storage_error", error.message)
        }
        log.write(line.text)
        return true
    }

    /// The answer of a CGI process that could not start (configuration, key file or database) to
    /// the one request it was run for: 503 `service_unavailable` with the headers every answer
    /// carries. Why it could not start goes to the log with the request id, never to the client.
    public static func notStarted(params: CGIParameters) -> (response: Response, requestId: String) {
        // Without the configuration the legacy token is unknown, so no client id is taken.
        let requestId = "w\(getpid())-start"
        var response = HTTPError(status: 503, code: "service_unavailable", message: "the service is not configured correctly").response
        addHeadersOfEveryAnswer(to: &response, requestId: requestId)
        return (response, requestId)
    }

    /// API.md: every response carries `X-Request-Id` and `X-Content-Type-Options: nosniff`.
    static func addHeadersOfEveryAnswer(to response: inout Response, requestId: String) {
        response.headers.append(("X-Request-Id", requestId))
        response.headers.append(("X-Content-Type-Options", "nosniff"))
    }

    /// The method as the log line names it: one of HTTP's own, else `other` (a FastCGI peer or a
    /// CGI caller may send anything there, a token or a coordinate; a security re-audit).
    static func loggedMethod(_ method: String?) -> String {
        guard let method else { return "-" }
        switch method {
        case "GET", "POST", "HEAD", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT": return method
        default: return "other"
        }
    }

    /// A request id from the web server is echoed only when it is short and plain, so it cannot
    /// inject anything into headers or logs, and when it holds nothing shaped like a token, an
    /// installation id or a coordinate: the shipped nginx and Apache hosts replace the client's
    /// header, but behind an `.htaccess` it arrives as sent, and a client that put its session
    /// token in it would have it logged. Rules on the id's shape alone, no secret: the legacy
    /// token is looked for by `holdsLegacyToken`, for the log line only.
    ///
    /// This runs for every request nginx sends an id with (all of them): the search is on bytes.
    /// (`String.contains` builds a substring searcher per call: 105,000 instructions a request,
    /// more than twice what the rest of a cached weather request costs; bench/RESULTS.md, session 12.)
    static func acceptableRequestId(_ id: String?) -> String? {
        guard var id, (1...128).contains(id.utf8.count), TokenSyntax.isRequestIdText(id) else { return nil }
        let holdsSecret = id.withUTF8 { text in
            Self.accessPrefix.withUnsafeBufferPointer { Self.occurs($0, in: text) }
                || Self.refreshPrefix.withUnsafeBufferPointer { Self.occurs($0, in: text) }
                || Self.holdsUUIDOrDecimal(text) || Self.holdsTokenBody(text)
        }
        return holdsSecret ? nil : id
    }

    /// Whether `id` holds the legacy token, compared in constant time.
    static func holdsLegacyToken(_ id: String, _ legacyToken: String?) -> Bool {
        guard var legacy = legacyToken, !legacy.isEmpty else { return false }
        var id = id
        return id.withUTF8 { text in legacy.withUTF8 { Self.occursInConstantTime($0, in: text) } }
    }

    /// Whether `text` holds 43 base64url characters in a row, not all hex digits and dashes: a
    /// token's body even without its `wta_`/`wtr_` prefix (a security re-audit found one echoed
    /// and logged). Ids of hex digits and dashes (nginx's 32, a trace parent's 55) are kept.
    static func holdsTokenBody(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard text.count >= 43 else { return false }
        var run = 0, beyondHex = false
        for c in text {
            let lower = c | 0x20
            let hex = c &- UInt8(ascii: "0") < 10 || lower &- UInt8(ascii: "a") < 6 || c == UInt8(ascii: "-")
            guard hex || lower &- UInt8(ascii: "a") < 26 || c == UInt8(ascii: "_") else {
                run = 0
                beyondHex = false
                continue
            }
            run += 1
            beyondHex = beyondHex || !hex
            if run >= 43 && beyondHex { return true }
        }
        return false
    }

    /// Whether `text` holds something shaped like an installation id (a UUID, 8-4-4-4-12 hex
    /// digits) or a decimal number (a digit, a dot, a digit: a coordinate). Neither may reach a
    /// log line, and a client's `X-Request-Id` behind an `.htaccess` would be logged as sent.
    /// nginx's and Apache's own ids hold neither (hex; letters, digits, `@` and `-`, no dots).
    /// (memchr finds the first dot or dash: nginx's 32 hex digits have neither, so its ids cost
    /// two calls and no loop of ours.)
    static func holdsUUIDOrDecimal(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        let dot = UInt8(ascii: ".")
        func isDigit(_ c: UInt8) -> Bool { c &- UInt8(ascii: "0") < 10 }
        guard let base = text.baseAddress else { return false }
        if let first = memchr(base, Int32(dot), text.count) {
            for i in (UnsafeRawPointer(first) - UnsafeRawPointer(base))..<text.count where text[i] == dot && i > 0 && i + 1 < text.count {
                if isDigit(text[i - 1]) && isDigit(text[i + 1]) { return true }
            }
        }
        return text.count >= 36 && memchr(base, Int32(UInt8(ascii: "-")), text.count) != nil && TokenSyntax.containsUUID(text)
    }

    private static let accessPrefix = Array(TokenKind.access.prefix.utf8), refreshPrefix = Array(TokenKind.refresh.prefix.utf8)

    /// Whether `secret` occurs in `text` (a request id: at most 128 bytes), in a time that depends
    /// on the two lengths alone: every byte of every window is compared, and nothing stops at a
    /// difference. API.md compares the legacy token in constant time; `occurs` stops at the first
    /// byte that differs, so a client's `X-Request-Id` timed the token a byte at a time (a
    /// black-box audit). At most 113 windows of the token's length: a few thousand byte operations.
    static func occursInConstantTime(_ secret: UnsafeBufferPointer<UInt8>, in text: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = secret.count
        guard count > 0, count <= text.count else { return false }
        var found: UInt8 = 0
        for start in 0...(text.count - count) {
            var difference: UInt8 = 0
            for i in 0..<count { difference |= text[start + i] ^ secret[i] }
            // 1 when the window matched, without a branch on the bytes.
            found |= UInt8(truncatingIfNeeded: (UInt16(difference) &- 1) >> 8)
        }
        return found != 0
    }

    /// Whether `pattern` occurs in `text` (a request id: at most 128 bytes): `memchr` finds each
    /// place its first byte is, `memcmp` compares from there (a loop over every start and a
    /// generic comparison cost about 420 instructions a request for the two token prefixes,
    /// which nginx's ids never hold; callgrind, session 29).
    static func occurs(_ pattern: UnsafeBufferPointer<UInt8>, in text: UnsafeBufferPointer<UInt8>) -> Bool {
        let count = pattern.count
        guard count > 0, count <= text.count, let p = pattern.baseAddress, let t = text.baseAddress else { return false }
        let last = text.count - count
        var start = 0
        while start <= last {
            guard let hit = memchr(t + start, Int32(p.pointee), last - start + 1) else { return false }
            let at = UnsafeRawPointer(hit) - UnsafeRawPointer(t)
            if memcmp(t + at, p, count) == 0 { return true }
            start = at + 1
        }
        return false
    }
}
