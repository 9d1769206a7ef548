import WeatherCore
import WeatherProviders
#if canImport(Glibc)
import Glibc
#endif

/// `GET /v1/weather` and `GET /v1/weather/trip`: authenticate, limit, snap, then answer from the
/// shared cache or from one provider call per cell across every worker (single flight).
final class WeatherHandler {
    let config: GatewayConfig
    let auth: Authenticator
    let limiter: Limiter
    let metrics: Metrics
    let store: any GatewayStore
    let source: (any WeatherSource)?
    let owner: String
    /// The gateway's clock: a fetch claim and a wait count from the time they start, not from the
    /// request's arrival (`Context.now`), which may be seconds earlier.
    let clock: any Clock
    /// This worker's copies of fresh cache rows (see `FreshBodies`).
    private var fresh: FreshBodies
    /// Seconds after the place's midnight at which a forecast stops being fresh, 0 to 59 at
    /// random (see `weatherBody`); tests fix it.
    var midnightSpread: () -> Int64 = { Int64.random(in: 0..<60) }
    /// The clock of the request's deadline and of waits, in nanoseconds (`MonotonicTime.now()`);
    /// tests move it on to stand for a provider's seconds.
    var monotonic: () -> UInt64 = { MonotonicTime.now() }

    init(
        config: GatewayConfig, auth: Authenticator, limiter: Limiter, metrics: Metrics, store: any GatewayStore, source: (any WeatherSource)?,
        clock: any Clock
    ) {
        self.clock = clock
        self.config = config
        self.auth = auth
        self.limiter = limiter
        self.metrics = metrics
        self.store = store
        self.source = source
        self.owner = FetchLockOwner.make(pid: getpid())
        self.fresh = FreshBodies(freshForAtMost: config.cacheTTL + Timestamp.slackSeconds)
    }

    var forecast: Route { Route(handler: self, trip: false) }
    var trip: Route { Route(handler: self, trip: true) }

    /// One of the two routes, sharing everything but parameter parsing.
    struct Route: Responder {
        let handler: WeatherHandler
        let trip: Bool
        func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
            try handler.respond(to: request, trip: trip, context: &context)
        }
    }

    func respond(to request: Request, trip: Bool, context: inout Context) throws(HTTPError) -> Response {
        let identity = try auth.authenticate(request, now: context.now)
        context.authMode = identity.mode
        context.sessionId = identity.grant?.sessionId
        metrics.count(Counters.Name.auth(identity.mode), at: context.now)
        if let grant = identity.grant { metrics.sawSession(grant.sessionId, lastSeenAt: grant.lastSeenAt, now: context.now) }

        let (lat, lon) = try WeatherParameters.coordinates(request)
        let query = trip ? try WeatherParameters.trip(request, today: context.now.utcDate) : try WeatherParameters.forecast(request)
        let point = GridPoint.snapping(lat: lat, lon: lon, degrees: config.gridDegrees)
        let use = Self.outlookUse(for: query, today: context.now.utcDate)
        // The cell's key and the answer's cache key, made once: the quota and the cache both use them.
        let (cell, key) = point.cacheKeys(query)

        if let grant = identity.grant {
            // A trip the cell's outlook cannot hold is a provider call of its own for every date
            // range (Visual Crossing bills each day), so each range counts as a cell of the
            // session's distinct-cell quota: one session asking far trips of ever new dates made
            // a call each time, up to its 120 requests an hour (a black-box security audit).
            let counted = use == .none ? key : cell
            try limiter.check(
                [limiter.weather(sessionId: grant.sessionId), limiter.weather(ip: context.clientIP)],
                cell: counted, sessionId: grant.sessionId, context: context)
        } else {
            try limiter.check([limiter.legacy(ip: context.clientIP), limiter.weather(ip: context.clientIP)], context: context)
        }

        let (body, state) = try answerBody(point: point, cell: cell, key: key, query: query, use: use, context: &context)
        // The stale copy served while another worker refreshes the cell is `stale` to the client
        // (it is older than the TTL), but no provider failed: counted apart, so `weatherctl stats`
        // shows failures in its stale column.
        let label = state == Self.staleWhileRefreshing ? "stale" : state
        context.cache = label
        metrics.count(Counters.Name.cache(state), at: context.now)
        return .json(200, Self.envelope(body, authMode: identity.mode, cache: label), headers: [("Cache-Control", "private, no-cache")])
    }

    /// How long an answer from a provider whose day has not turned yet stays fresh at least.
    static let notTurnedSeconds: Int64 = 60

    /// `weatherBody`'s state for a stale copy answered while another worker fetches the cell.
    static let staleWhileRefreshing = "stale_refreshing"

    /// The answer's report body and its cache state. A forecast, whatever its `days`, is cut
    /// from the cell's outlook (`WeatherQuery.outlook`: one provider call per cell and TTL, which
    /// providers count as one record), and so is a trip whose dates the outlook holds; the worker
    /// keeps each cut while the outlook is fresh, so a cached request costs what it did. What the
    /// outlook cannot give (more days than the provider sent; a trip's dates outside it) is
    /// fetched and cached as asked, unless the providers just failed for the outlook: then the
    /// request's own copy (fresh, or within its stale window) or that failure, not a second round
    /// of calls in one request. An outlook that cannot be had at all gives way to the request's
    /// own copy too, as API.md serves a stale copy rather than an error. A trip from UTC's
    /// yesterday takes a fresh outlook if one is there, else is asked for as it is, and only when
    /// that fails is a stale outlook cut for it. `use` is `outlookUse(for: query, …)`, `cell`
    /// `point.key` and `key` the answer's cache key (`cell|kind`), each worked out once per request.
    func answerBody(point: GridPoint, cell: String, key: String, query: WeatherQuery, use: OutlookUse, context: inout Context) throws(HTTPError) -> (
        [UInt8], String
    ) {
        let now = context.now
        if let kept = fresh.body(for: key, now: now) { return (kept.body, "hit") }
        let outlookKey = cell + "|" + WeatherQuery.outlook.cacheKind
        switch use {
        case .none:
            break
        case .ifCached:
            if let outlook = try storedCopy(key: outlookKey, now: now), outlook.state == "hit",
                let cut = keptCut(of: outlook, for: query, key: key, now: now)
            {
                return (cut, "hit")
            }
            do throws(HTTPError) {
                let answer = try weatherBody(point: point, query: query, context: &context)
                return (answer.body, answer.state)
            } catch {
                guard error.code != HTTPError.storageUnavailable.code, let outlook = try storedCopy(key: outlookKey, now: now),
                    let cut = Self.cut(outlook, for: query)
                else { throw error }
                return (cut, outlook.state)
            }
        case .fetch:
            let outlook: CellBody
            do throws(HTTPError) {
                outlook = try weatherBody(point: point, query: .outlook, context: &context)
            } catch {
                return try ownCopy(key: key, for: query, insteadOf: error, now: now)
            }
            if let cut = keptCut(of: outlook, for: query, key: key, now: now) { return (cut, outlook.state) }
            if let failure = outlook.failure { return try ownCopy(key: key, for: query, insteadOf: failure, now: now) }
            // The stale outlook another worker is fetching holds the days asked but for those
            // ended since the place's midnight (or it was fetched under a clock since set back):
            // the fresh one will hold them, so it is waited for and cut, not a provider called
            // for this request's own row (a review: one more call a cell each midnight for
            // `days=15`).
            if outlook.state == Self.staleWhileRefreshing, outlook.daysEnded != 0, case .forecast(let days) = query, let source,
                ReportSlice.forecast(outlook.body, days: days) != nil
            {
                do throws(HTTPError) {
                    let (budget, claimSeconds) = Self.fetchBudget(of: source)
                    if let awaited = try awaitOtherWorker(
                        key: outlookKey, query: .outlook, seen: outlook.fetchedAt, source: source, budget: budget, claimSeconds: claimSeconds,
                        context: &context),
                        let cut = Self.cut(awaited, for: query)
                    {
                        return (cut, awaited.state)
                    }
                } catch {
                    return try ownCopy(key: key, for: query, insteadOf: error, now: now)
                }
            }
            // The outlook came back short of its 15 days, so it could not hold the trip, and the
            // trip alone is further than a provider is asked for: the provider's shortfall, not
            // days this gateway cannot cover (a date re-check; "asking again will not help" was
            // untrue).
            if source?.uncoveredFetch(query, now: now) != nil, ReportSlice.forecast(outlook.body, days: WeatherQuery.maxDays) == nil {
                throw .providerError
            }
            // A forecast's row of its own (the outlook could not hold its days: a provider whose
            // day had not turned, or that sends fewer) is kept by this worker no longer than the
            // outlook it stood in for: kept to its own end, it answered before an outlook that
            // held the days again, with yesterday as `daily[0]`, on some workers only (a race hunt).
            let answer = try weatherBody(point: point, query: query, context: &context)
            if case .forecast = query {
                if let until = answer.freshUntil, let bound = outlook.freshUntil {
                    fresh.keep(answer.body, for: key, until: min(until, bound), now: now)
                } else {
                    fresh.forget(key)
                }
            }
            return (answer.body, answer.state)
        }
        let answer = try weatherBody(point: point, query: query, context: &context)
        return (answer.body, answer.state)
    }

    /// `query`'s answer cut from `outlook`, kept under `key` while the outlook is fresh; nil when
    /// the outlook does not hold its days.
    func keptCut(of outlook: CellBody, for query: WeatherQuery, key: String, now: Timestamp) -> [UInt8]? {
        guard let cut = Self.cut(outlook, for: query) else { return nil }
        if let until = outlook.freshUntil { fresh.keep(cut, for: key, until: until, now: now) }
        return cut
    }

    /// The request's own copy (fresh or stale) standing in for `error`, which it is without one
    /// and for a storage failure. Read for this request only: kept to its own end, a row fetched
    /// while the outlook could not hold its days went on answering after the outlook had
    /// recovered (a review; the outlook's own path keeps such a row no longer than the outlook).
    func ownCopy(key: String, for query: WeatherQuery, insteadOf error: HTTPError, now: Timestamp) throws(HTTPError) -> ([UInt8], String) {
        guard error.code != HTTPError.storageUnavailable.code, let own = try storedCopy(key: key, now: now), own.answers(query) else { throw error }
        fresh.forget(key)
        return (own.body, own.state)
    }

    /// `query`'s answer cut from an outlook; nil when the outlook does not hold its days. A
    /// forecast from a stale outlook that has outlived the place's midnight (`CellBody.daysEnded`)
    /// is cut from the place's today, leaving out the days that have ended, and only when the
    /// days asked are all there (API.md: `daily` covers exactly the days asked; `days=15` just
    /// after midnight is not). A trip is cut by its dates from the outlook as stored.
    static func cut(_ outlook: CellBody, for query: WeatherQuery) -> [UInt8]? {
        switch query {
        case .forecast(let days) where outlook.daysEnded > 0:
            ReportSlice.dropping(days: outlook.daysEnded, from: outlook.body).flatMap { ReportSlice.forecast($0, days: days) }
        case .forecast where outlook.daysEnded < 0: nil
        case .forecast(let days): ReportSlice.forecast(outlook.body, days: days)
        case .trip(let start, let end): ReportSlice.trip(outlook.body, start: start, end: end)
        case .outlook: outlook.body
        }
    }

    /// How a request uses the cell's outlook.
    enum OutlookUse {
        /// Not at all: a trip outside every outlook.
        case none
        /// One already fresh, or a stale one if asking for the trip fails: a trip from UTC's
        /// yesterday, which an outlook holds only where that date is still today (west of UTC,
        /// for as many hours of the UTC day as the place is behind: the Americas' evenings); a
        /// cold cell is not fetched for it, the trip is asked for as it is.
        case ifCached
        /// Fetched if need be: every forecast, and a trip from UTC's today on.
        case fetch
    }

    /// The last day after UTC's today an outlook can hold: it covers its place's today through
    /// 14 days later, and a place's today is at most a day ahead of UTC's.
    static let outlookReach = 15

    static func outlookUse(for query: WeatherQuery, today: LocalDate) -> OutlookUse {
        guard case .trip(let start, let end) = query else { return .fetch }
        guard end <= today.adding(days: outlookReach), start >= today.adding(days: -1) else { return .none }
        return start >= today ? .fetch : .ifCached
    }

    /// A stored report body, its cache state, and until when it is fresh (nil: not known fresh).
    struct CellBody {
        var body: [UInt8]
        var state: String
        var freshUntil: Timestamp?
        /// For a stale copy served because no provider answered (failed, paused, none configured,
        /// none covering the days): the error the request would have had without it.
        var failure: HTTPError?
        /// For a stale copy of a forecast: how many of the days its `daily` begins with have ended
        /// at the place since the fetch (`staleCopy`); a forecast cut from it leaves them out
        /// (`cut`), a forecast's own row no longer answers (`answers`), a trip is cut by its dates.
        /// -1 for a copy whose first day has not begun at the place (fetched under a clock since
        /// set back): no forecast is served from it.
        var daysEnded = 0
        /// For a stale copy: its fetch's time, which tells a waiter whether the row it finds after
        /// another worker's fetch is that fetch's answer (`awaitOtherWorker`'s `seen`).
        var fetchedAt: Timestamp?

        /// Whether this copy of `query`'s own row answers it: not a stale forecast whose first day
        /// is no longer the place's today (it has ended, or not begun), since its row holds
        /// exactly the days asked from that day (API.md: `daily` covers exactly the days asked,
        /// so neither those days nor fewer will do).
        func answers(_ query: WeatherQuery) -> Bool {
            guard daysEnded != 0, case .forecast = query else { return true }
            return false
        }
    }

    /// The copy of `key` this worker or the store holds: fresh (`hit`; kept by this worker
    /// until it is not), or stale within its window (`stale`, with the days ended since its
    /// fetch counted: `staleCopy`); nil when there is none. A row
    /// fresh for longer than the TTL from now was fetched under a clock since set back (its
    /// `fetchedAt` lies ahead, its `daily` may start a day early): stale, so it is fetched
    /// again; it was a `hit` for the whole step (a black-box clock test).
    func storedCopy(key: String, now: Timestamp) throws(HTTPError) -> CellBody? {
        if let kept = fresh.body(for: key, now: now) { return CellBody(body: kept.body, state: "hit", freshUntil: kept.until) }
        let cached: CachedWeather?
        do { cached = try store.cachedWeather(key: key, now: now) } catch { throw .storageUnavailable }
        guard let cached else { return nil }
        guard isFresh(cached, now: now) else { return Self.staleCopy(cached, now: now) }
        fresh.keep(cached.body, for: key, until: cached.freshUntil, now: now)
        return CellBody(body: cached.body, state: "hit", freshUntil: cached.freshUntil)
    }

    /// A stale copy, with the days its `daily` begins with that have ended at the place since
    /// the fetch counted (`CellBody.daysEnded`): such a copy outlived the place's midnight (the
    /// providers failing, or another worker fetching the cell just after it), and a forecast
    /// served from it as stored began with yesterday. Days after the first count as 24 hours (a
    /// clock change in between moves that by its hour). A first day that ends more than a day
    /// and an hour (the longest day) from now has not begun at the place: the copy was fetched
    /// under a clock since set back, and a forecast from it would start at tomorrow (-1; a
    /// review). A trip's row, and one stored without an end (no offset from the provider, or
    /// before migration 0006), counts none. Counted, not cut: the body is read only where a
    /// forecast is cut from it. An end beyond any real clock (a damaged or hand-edited row) counts
    /// as long ended or not begun rather than overflowing.
    static func staleCopy(_ cached: CachedWeather, now: Timestamp) -> CellBody {
        var copy = CellBody(body: cached.body, state: "stale", fetchedAt: cached.fetchedAt)
        guard let end = cached.firstDayEndsAt else { return copy }
        let (past, overflow) = now.seconds.subtractingReportingOverflow(end)
        if overflow {
            copy.daysEnded = end < 0 ? Int(Int32.max) : -1
        } else if past >= 0 {
            copy.daysEnded = Int(min(1 + past / 86_400, Int64(Int32.max)))
        } else {
            copy.daysEnded = past < -90_000 ? -1 : 0
        }
        return copy
    }

    /// Fresh by this clock: before its `freshUntil`, and not fresh for longer than the TTL from
    /// now (see `storedCopy`).
    func isFresh(_ cached: CachedWeather, now: Timestamp) -> Bool {
        now < cached.freshUntil && cached.freshUntil.seconds - now.seconds <= fresh.freshForAtMost
    }

    /// The stored report body for `query` and its cache state. Fresh copy: `hit`. Otherwise one
    /// worker fetches while the others serve the stale copy (`staleWhileRefreshing`) or wait for
    /// the fresh one; `stale` when no provider answered (failed, paused, none configured, none
    /// covering the days) and a copy is kept.
    func weatherBody(point: GridPoint, query: WeatherQuery, context: inout Context) throws(HTTPError) -> CellBody {
        let now = context.now
        let key = point.cacheKeys(query).cache
        // A copy that cannot answer is none: no stale answer, and while another worker fetches,
        // its answer is waited for.
        let stored = try storedCopy(key: key, now: now)
        let copy = stored.flatMap { $0.answers(query) ? $0 : nil }
        if let copy, copy.state == "hit" { return copy }
        /// The stale copy standing in for `failure`, or that failure.
        func staleOr(_ failure: HTTPError) throws(HTTPError) -> CellBody {
            guard var stale = copy else { throw failure }
            stale.failure = failure
            return stale
        }

        guard let source, source.isConfigured else {
            return try staleOr(HTTPError(status: 503, code: "provider_not_configured", message: "no weather provider is configured on this gateway"))
        }
        // No provider covers the days (a far trip without Visual Crossing): said at once, without
        // the fetch lock (a waiter for it could not tell why the fetch ended).
        if let uncovered = source.uncoveredFetch(query, now: now) {
            context.addProviders(uncovered.trail)
            return try staleOr(Self.failure(of: uncovered))
        }
        // Every provider in a pause after failing: the answer a fetch would give, at once, without
        // the fetch lock's two writes or waiting for another worker's fetch.
        if let paused = source.pausedFetch(query, now: now) {
            context.addProviders(paused.trail)
            return try staleOr(Self.failure(of: paused))
        }
        let (budget, claimSeconds) = Self.fetchBudget(of: source)
        // Without the claim, another worker is calling the provider for this cell right now. One
        // that has ended (killed mid-fetch) is taken over: by the claim itself, or once a waiter
        // sees it end (`awaitOtherWorker` gives nil), at most once a request.
        // Timed from now, not from the request's arrival: a request that first waited seconds for
        // the cell's outlook (or for the writers' queue) claimed with those seconds already gone,
        // and its claim could run out while its own fetch ran, letting another worker call the
        // provider again and a waiter answer 504 (a race audit, session 30). A clock set back
        // meanwhile counts from the arrival, as before.
        let claimStart = max(now, clock.now()), started = monotonic()
        var acquired = false
        for _ in 0..<2 {
            // The request's time is spent (on an earlier fetch, or waiting for another worker's
            // fetch that then ended without an answer): no claim, and the chain, given no time,
            // calls nobody and names each provider `out_of_time` in the log.
            guard secondsLeft(context) >= ProviderChain.shortestCall else {
                let none = source.fetch(query, at: point, now: now, within: 0)
                context.addProviders(none.trail)
                return try staleOr(Self.failure(of: none))
            }
            let claimedAt = claimStart.adding(seconds: Int64((monotonic() - started) / 1_000_000_000))
            do {
                acquired = try store.acquireFetchLock(key: key, owner: owner, now: claimedAt, until: claimedAt.adding(seconds: claimSeconds))
            } catch { throw .storageUnavailable }
            // After the claim's write: a wait in the writers' queue for it does not shorten the
            // request's first fetch or wait.
            startDeadline(&context, budget: budget)
            if acquired { break }
            if var stale = copy {
                stale.state = Self.staleWhileRefreshing
                return stale
            }
            if let body = try awaitOtherWorker(
                key: key, query: query, seen: stored?.fetchedAt, source: source, budget: budget, claimSeconds: claimSeconds, context: &context)
            {
                return body
            }
        }
        guard acquired else { throw .providerTimeout }
        defer { try? store.releaseFetchLock(key: key, owner: owner) }  // expires by itself if this fails
        // Another worker may have stored the cell and let its claim go between this request's
        // read of the cache and its claim: its answer is used, not fetched again (1 in 80 bursts
        // of six requests for a new cell made two provider calls).
        if let stored = try? store.cachedWeather(key: key, now: now), isFresh(stored, now: now) {
            fresh.keep(stored.body, for: key, until: stored.freshUntil, now: now)
            return CellBody(body: stored.body, state: "hit", freshUntil: stored.freshUntil)
        }
        let fetched = source.fetch(query, at: point, now: now, within: secondsLeft(context))
        context.addProviders(fetched.trail)
        for attempt in fetched.attempts {
            metrics.count(Counters.Name.providerCall(attempt.provider), at: now)
            if attempt.failed { metrics.count(Counters.Name.providerError(attempt.provider), at: now) }
        }
        switch fetched.result {
        case .success(let report):
            let body = report.json
            var until = now.adding(seconds: config.cacheTTL)
            // A forecast starts at the place's today: fresh no longer than that day, or just after
            // midnight a cached one answered with yesterday as `daily[0]` (and a Caiyun-only
            // gateway refused a trip through today+14 its cut could not hold; a black-box date
            // audit). Up to a minute later, at random, so that the cells of one time zone do not
            // all go stale in the same second, nor meet every provider before its day has turned.
            // An answer from a provider whose day has not turned yet is kept for as long as the
            // day has run, a minute at least (a review): asked again at about 00:01, 00:02,
            // 00:04, 00:08 … while the provider lags, not every minute for hours. A trip's
            // dates are its own.
            if query.includesCurrent, let end = report.todayEndsAt, end > now.seconds {
                let keep = report.dayNotTurned ? now.seconds + max(Self.notTurnedSeconds, 86_400 - (end - now.seconds)) : end + midnightSpread()
                until = Timestamp(seconds: min(until.seconds, keep))
            }
            do {
                try store.storeWeather(
                    key: key, body: body, fetchedAt: now, freshUntil: until,
                    staleUntil: now.adding(seconds: config.cacheTTL + config.cacheStaleTTL),
                    firstDayEndsAt: query.includesCurrent ? report.firstDayEndsAt : nil)
                fresh.keep(body, for: key, until: until, now: now)
            } catch {
                // The answer is good even if it could not be cached.
                return CellBody(body: body, state: "miss")
            }
            return CellBody(body: body, state: "miss", freshUntil: until)
        case .failure:
            return try staleOr(Self.failure(of: fetched))
        }
    }

    /// Starts the request's deadline (`Context.deadline`) at its first fetch or wait (once the
    /// first claim is written), one fetch's `budget` away: every later fetch and wait of the
    /// request shares that time. Each used to get a full round of timeouts, so an outlook and then
    /// the request's own row, or a wait for another worker's fetch and then a fetch of its own,
    /// took 12 to 17 s with two 4 s providers, past the web server's 15 s (a failure-path audit,
    /// session 31). Started there, not when the request came in, so that a request's only fetch
    /// has the time it always had, however long the statements before it took; statements after
    /// it (a second claim, the cache) do take from the time.
    func startDeadline(_ context: inout Context, budget: Double) {
        guard context.deadline == .max else { return }
        context.deadline = MonotonicTime.deadline(after: budget, from: monotonic())
    }

    /// Seconds until the request's deadline (`Context.deadline`), 0 once it has passed.
    func secondsLeft(_ context: Context) -> Double { MonotonicTime.seconds(until: context.deadline, from: monotonic()) }

    /// How long a fetch may take (the providers' worst case and a second), and how long its claim
    /// holds, in whole seconds, a second more. A request's deadline is as far: all its fetches
    /// and waits together take no longer than one fetch may.
    static func fetchBudget(of source: any WeatherSource) -> (seconds: Double, claimSeconds: Int64) {
        let budget = source.worstCaseSeconds + 1
        return (budget, Int64(budget.rounded(.up)) + 1)
    }

    /// 504 `provider_timeout` or 502 `provider_error` for a failed fetch, with `Retry-After` while
    /// a provider is in a pause; 502 `provider_error` saying so when no provider covers the days.
    static func failure(of fetched: WeatherFetch) -> HTTPError {
        var error: HTTPError =
            switch fetched.result {
            case .failure(.timeout): .providerTimeout
            case .failure(.notCovered): .daysNotCovered
            default: .providerError
            }
        if let retryAfter = fetched.retryAfter { error.headers["Retry-After"] = "\(retryAfter)" }
        return error
    }

    /// Polls the cache while another worker fetches; gives up after that worker's time budget or
    /// at the request's deadline, whichever comes first (504).
    /// When that fetch ends without a body and every provider that could serve `query` is then
    /// in a pause (shared by the workers: that fetch's own failures are recorded before its lock
    /// is released), the answer is that failure with its `Retry-After`. Nil when the fetching
    /// worker has ended without letting its claim go, or when its fetch stored an answer that is
    /// already not fresh by this request's clock: this one should fetch. `seen`: the fetch time of
    /// the copy this request found before it tried to claim the cell (nil: none).
    private func awaitOtherWorker(
        key: String, query: WeatherQuery, seen: Timestamp?, source: any WeatherSource, budget: Double, claimSeconds: Int64,
        context: inout Context
    ) throws(HTTPError) -> CellBody? {
        startDeadline(&context, budget: budget)
        let monotonic = self.monotonic
        let started = monotonic(), requestTime = max(context.now, clock.now())
        let deadline = min(MonotonicTime.deadline(after: budget, from: started), context.deadline)
        let store = self.store
        var trail: String?
        defer { if let trail { context.addProviders(trail) } }
        // The request's clock (the gateway's injected one), moved on by the wait.
        func now() -> Timestamp { requestTime.adding(seconds: Int64((monotonic() - started) / 1_000_000_000)) }
        guard
            let body = try Self.awaitFetch(
                pollAgain: {
                    usleep(20_000); return monotonic() < deadline
                },
                freshBody: { () throws(StoreError) -> [UInt8]? in
                    let now = now()
                    return try store.cachedWeather(key: key, now: now).flatMap { isFresh($0, now: now) ? $0.body : nil }
                },
                fetchState: { () throws(StoreError) -> FetchLockState in
                    let now = now()
                    return try store.fetchLockState(key: key, now: now, until: now.adding(seconds: claimSeconds))
                },
                paused: {
                    guard let paused = source.pausedFetch(query, now: now()) else { return nil }
                    trail = paused.trail
                    return Self.failure(of: paused)
                },
                // A copy other than the one this request found before it tried to claim the cell is
                // the awaited fetch's answer (or a later one): that fetch succeeded, though the
                // copy's freshness, counted in whole seconds, ended by this request's clock (a TTL
                // of a second; a fetch in the second before a cell stops being fresh at the
                // place's midnight). The fetching worker stores before it lets its claim go, and
                // this request read the cache before its claim failed, so it cannot take that
                // answer for the copy it found.
                fetchedMeanwhile: { () throws(StoreError) -> Bool in
                    guard let stored = try store.cachedWeather(key: key, now: now()) else { return false }
                    return stored.fetchedAt != seen
                })
        else { return nil }
        // Fresh, but until when is the fetching worker's: this one keeps no copy or cut of it.
        return CellBody(body: body, state: "hit")
    }

    /// The waiting loop of `awaitOtherWorker`: a fresh body; when the other worker's fetch ended
    /// without one, the `paused` answer (502 or 504 with `Retry-After`) if every provider is in
    /// a pause, else 502 (a failure that paused nothing: of this query only), or 504 when its
    /// claim ran out instead of being let go (that worker died or overran: nothing failed that
    /// a 502 could name); nil when that worker has ended with its claim still live
    /// (`abandoned`: killed mid-fetch; the caller fetches itself instead of waiting for the claim
    /// to run out and answering 504), and nil too when that fetch stored an answer no longer fresh
    /// (`fetchedMeanwhile`: it was 502 although the provider had answered, a black-box drill with a
    /// TTL of one second); 504 when `pollAgain` says time is up; 503 when storage fails. A pause
    /// alone does not end the wait: one begun by another cell's fetch says nothing of this one,
    /// whose call may still succeed. Polling only reads: the waiters of a slow fetch used to take
    /// the write lock every 20 ms each.
    ///
    /// The fetching worker stores its answer before it releases its lock, so once the lock is
    /// free the cache is read once more, and only if it is still empty did that fetch fail.
    /// (Reading it only before the lock check answered 502 whenever the fetch ended between the
    /// two reads: 9 of 600 first requests for new cells, two at a time, in session 9's test.)
    static func awaitFetch(
        pollAgain: () -> Bool, freshBody: () throws(StoreError) -> [UInt8]?, fetchState: () throws(StoreError) -> FetchLockState,
        paused: () -> HTTPError? = { nil }, fetchedMeanwhile: () throws(StoreError) -> Bool = { false }
    ) throws(HTTPError) -> [UInt8]? {
        var failure: HTTPError?
        do throws(StoreError) {
            while failure == nil && pollAgain() {
                if let body = try freshBody() { return body }
                let state = try fetchState()
                guard state != .held else { continue }
                if let body = try freshBody() { return body }
                if state == .abandoned { return nil }
                if let paused = paused() {
                    failure = paused
                } else if try fetchedMeanwhile() {
                    return nil
                } else {
                    failure = state == .expired ? .providerTimeout : .providerError
                }
            }
            // Time is up: the cache once more, as a wait that began at its deadline (the request's
            // time spent before it) has not read it at all.
            if failure == nil, let body = try freshBody() { return body }
        } catch {
            throw .storageUnavailable
        }
        throw failure ?? .providerTimeout
    }

    /// `{"authMode":..., <stored report fields>, "cache":...}` without decoding the stored body,
    /// in one buffer of its exact size (every weather answer is wrapped so).
    static func envelope(_ report: [UInt8], authMode: AuthMode, cache: String) -> [UInt8] {
        let open = "{\"authMode\":\"", afterMode = "\",", beforeCache = ",\"cache\":\"", close = "\"}"
        let inner = max(0, report.count - 2)
        let size = open.utf8.count + authMode.rawValue.utf8.count + afterMode.utf8.count + inner + beforeCache.utf8.count + cache.utf8.count + close.utf8.count
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
            var w = ByteWriter(buffer)
            w.write(open)
            w.write(authMode.rawValue)
            w.write(afterMode)
            if inner > 0 { report.withUnsafeBufferPointer { w.write(UnsafeBufferPointer(rebasing: $0[1..<($0.count - 1)])) } }
            w.write(beforeCache)
            w.write(cache)
            w.write(close)
            initialized = w.count
        }
    }
}

/// A worker's own copies of cache rows while they are fresh, and of the answers cut from an
/// outlook row under each answer's own key, so a hit costs no SQLite read.
///
/// Safe without any cross-worker signal: a row is only ever replaced by a fetch, and a fetch only
/// happens once the row is no longer fresh, so until `freshUntil` the shared row and this copy are
/// the same bytes, and a cut is kept no longer than the outlook it was cut from is fresh.
/// Bounded: at most `capacity` entries; when full, expired ones go, and if none has expired the
/// whole table is dropped (one SQLite read per cell refills it).
struct FreshBodies {
    private var entries: [String: (body: [UInt8], until: Timestamp)] = [:]
    let capacity: Int
    /// Seconds a body can be fresh from now (the TTL and a little): one kept longer ahead was
    /// kept under a clock since set back.
    let freshForAtMost: Int64

    init(capacity: Int = 128, freshForAtMost: Int64 = .max) {
        self.capacity = capacity
        self.freshForAtMost = freshForAtMost
    }

    func body(for key: String, now: Timestamp) -> (body: [UInt8], until: Timestamp)? {
        guard let e = entries[key], now < e.until, e.until.seconds - now.seconds <= freshForAtMost else { return nil }
        return e
    }

    mutating func forget(_ key: String) { entries[key] = nil }

    mutating func keep(_ body: [UInt8], for key: String, until: Timestamp, now: Timestamp) {
        guard capacity > 0, now < until else { return }
        if entries.count >= capacity, entries[key] == nil {
            entries = entries.filter { now < $0.value.until }
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        }
        entries[key] = (body, until)
    }
}
