import WeatherCore
import WeatherCrypto

/// The six quotas of API.md as named buckets, checked against state shared by every worker.
///
/// One per worker process. A bucket this worker draws from again within `leaseMs` is busy here,
/// so it asks for up to `leaseUnits` more units in the same take (a lease of at most an
/// eighth of the bucket's free units, and none below `GCRA.minimumLease`) and spends them without
/// touching the database; whatever is left when the lease ends goes back (`returnLeases`). Totals stay exact:
/// a lease is taken from the shared bucket before any of it is spent, so N allowed is still N
/// served across all workers. The cost is that units leased here are not available to other
/// workers for up to a second, which only matters for a bucket with little room, and such a bucket
/// grants no leases. Since the SQLite store keeps its buckets in shared memory
/// (`SharedRateTable`), a take is no write, so a lease mainly saves that table's lock; other
/// stores take in a transaction, where it saves a write. A session's refresh bucket is never leased: a rotation takes its unit in its
/// own transaction (`rotationCharge`). Cells a session was admitted to are remembered until they
/// stop counting.
final class Limiter {
    let store: any GatewayStore
    let limits: LimitSettings
    let metrics: Metrics

    /// Units a lease asks for at most, and how long it is kept before its leftovers go back.
    static let leaseUnits = 256
    static let leaseMs: Int64 = 1000
    /// Bound on the per-worker tables below; reaching it empties the table (it only saves work).
    static let tableLimit = 1024

    /// A class, so that spending a unit changes the lease without writing to `leases`: writing
    /// through the dictionary's subscript runs three nested accessors whose frames were three
    /// allocations per bucket per request (valgrind's DHAT).
    private final class Lease {
        var units: Int
        let bucket: LimitBucket
        let endsMs: Int64
        init(units: Int, bucket: LimitBucket, endsMs: Int64) {
            self.units = units
            self.bucket = bucket
            self.endsMs = endsMs
        }
    }
    private var leases: [String: Lease] = [:]
    /// When this worker last took each bucket from the store (the sign that a bucket is busy here).
    private var lastTaken: [String: Int64] = [:]
    /// Until when a cell counts for a session.
    private var countedCells: [CellKey: Int64] = [:]
    /// Sessions whose distinct-cell quota refused here, and until when it stays full: cells are
    /// only ever added within the window, so the count cannot fall before its oldest cell stops
    /// counting. Until then a new cell is refused with no write at all (the refusal used to take
    /// and give back the rate units and run the count in a write transaction, every time).
    private var fullSessions: [String: Int64] = [:]
    /// The session and the cell, kept as they are (joining them into one string cost two
    /// allocations a request).
    private struct CellKey: Hashable {
        let sessionId: String
        let cell: String
    }

    /// Keys the client addresses in bucket keys (`addressKey`).
    private let addressHasher: SipHash24

    /// `hashKey` is the server key (`WEATHER_HASH_KEY`): the addresses' SipHash key is derived
    /// from it, so every worker of the service keys an address alike, and only the server does.
    init(store: any GatewayStore, limits: LimitSettings, metrics: Metrics, hashKey: [UInt8]) {
        self.store = store
        self.limits = limits
        self.metrics = metrics
        addressHasher = SipHash24(key: Array(HMACSHA256.authenticationCode(for: Array("rate bucket addresses".utf8), key: hashKey).prefix(16)))
    }

    /// How a client address appears in a bucket key: 16 hex digits of its keyed hash, never the
    /// address (the privacy notice's promise; since session 35). Its bucket lives in the table the
    /// workers share or, without one, in `weather_rate_limits`, and `-writer` keeps the table's
    /// seed beside its hashes: an address as it was could be found again there by trying all of
    /// IPv4. Two addresses share a bucket only when 64 bits of keyed hash collide.
    func addressKey(_ ip: String, after prefix: String = "") -> String { addressHasher.hex(ip, after: prefix) }

    /// An address's bucket of a quota of `limit` an hour; a quota that is off is never taken, so
    /// its key is left at the prefix and the address not hashed.
    private func addressBucket(_ prefix: String, _ ip: String, limit: Int) -> LimitBucket {
        let quota = hourly(limit)
        return LimitBucket(key: quota.isEnabled ? addressKey(ip, after: prefix) : prefix, quota: quota)
    }

    private func hourly(_ limit: Int) -> Quota { Quota(limit: limit, window: limits.hourWindow) }

    func sessionCreation(ip: String) -> LimitBucket { addressBucket("create_ip:", ip, limit: limits.sessionCreatePerIPPerHour) }
    func refresh(sessionId: String) -> LimitBucket { LimitBucket(key: "refresh_session:\(sessionId)", quota: hourly(limits.refreshPerSessionPerHour)) }
    func weather(sessionId: String) -> LimitBucket { LimitBucket(key: "weather_session:\(sessionId)", quota: hourly(limits.requestsPerSessionPerHour)) }
    func weather(ip: String) -> LimitBucket { addressBucket("weather_ip:", ip, limit: limits.requestsPerIPPerHour) }
    func legacy(ip: String) -> LimitBucket { addressBucket("legacy_ip:", ip, limit: limits.legacyRequestsPerIPPerHour) }
    var cellQuota: Quota { Quota(limit: limits.gridCellsPerSessionPerDay, window: limits.dayWindow) }

    /// Takes one request from each bucket or throws 429 with the wait of the bucket that refused.
    func check(_ buckets: [LimitBucket], context: Context) throws(HTTPError) {
        let active = buckets.filter(\.quota.isEnabled)
        guard !active.isEmpty else { return }
        // The common case when busy: every bucket has leased units here; no database at all,
        // and nothing else to wait for (a creation's own write does: `pendingCharge`).
        if coveredByLeases(active) {
            for b in active { if let lease = leases[b.key] { lease.units -= 1 } }
            return
        }
        let pending = storeCharge(active, nowMs: context.now.seconds * 1000)
        let grant: LimitGrant
        do { grant = try store.take(pending.charge.buckets, extra: pending.charge.extra, nowMs: pending.charge.nowMs) } catch {
            throw .storageUnavailable
        }
        try settle(pending, grant, context: context)
    }

    /// Every one of `active` has leased units here.
    private func coveredByLeases(_ active: [LimitBucket]) -> Bool {
        !leases.isEmpty && active.allSatisfy { (leases[$0.key]?.units ?? 0) > 0 }
    }

    /// The buckets of `active` with no leased units here, each with the lease it asks for (a
    /// bucket taken here within `leaseMs` is busy).
    private func storeCharge(_ active: [LimitBucket], nowMs: Int64) -> PendingCharge {
        let fromStore = active.filter { (leases[$0.key]?.units ?? 0) == 0 }
        let extra = fromStore.map { b in nowMs - (lastTaken[b.key] ?? .min / 2) < Self.leaseMs ? Self.leaseUnits : 0 }
        return PendingCharge(active: active, charge: LimitCharge(buckets: fromStore, extra: extra, nowMs: nowMs))
    }

    /// What `check` still has to take from the store once leased units here are accounted for
    /// (an empty charge when leased units cover every bucket: no database at all); nil when no
    /// bucket is enabled. Nothing is spent until `settle`. A write that the request makes anyway
    /// takes the charge in its own transaction (`GatewayStore.createSession(_:tokens:charging:)`),
    /// and `settle` then does the rest: one turn in the writers' queue instead of two, and a
    /// write that fails spends nothing, leased units included.
    func pendingCharge(_ buckets: [LimitBucket], context: Context) -> PendingCharge? {
        let active = buckets.filter(\.quota.isEnabled)
        guard !active.isEmpty else { return nil }
        let nowMs = context.now.seconds * 1000
        if coveredByLeases(active) { return PendingCharge(active: active, charge: LimitCharge(buckets: [], extra: [], nowMs: nowMs)) }
        return storeCharge(active, nowMs: nowMs)
    }

    /// Buckets of a request and the part of them the store is to take (`pendingCharge`).
    struct PendingCharge {
        let active: [LimitBucket]
        let charge: LimitCharge
    }

    /// Finishes `check` with the store's `grant` for `pending`: 429 when it refused; else the
    /// leases it granted are kept here and one leased unit of every bucket the store skipped is
    /// spent (only now that nothing refused).
    func settle(_ pending: PendingCharge, _ grant: LimitGrant, context: Context) throws(HTTPError) {
        let fromStore = pending.charge.buckets, nowMs = pending.charge.nowMs
        switch grant {
        case .refused(let retryAfter, let bucket):
            throw refusal(by: bucket, retryAfter: retryAfter, context: context)
        case .granted(let units):
            if !fromStore.isEmpty, lastTaken.count >= Self.tableLimit { lastTaken.removeAll(keepingCapacity: true) }
            for (b, n) in zip(fromStore, units) {
                lastTaken[b.key] = nowMs
                if n > 1 {
                    leases[b.key] = Lease(units: n - 1, bucket: b, endsMs: nowMs + Self.leaseMs)
                    firstEndMs = min(firstEndMs, nowMs + Self.leaseMs)
                }
            }
        }
        for b in pending.active where !fromStore.contains(where: { $0.key == b.key }) {
            if let lease = leases[b.key] { lease.units -= 1 }
        }
    }

    /// The 429 of the quota whose bucket key is `bucketKey` (its name is the key's prefix), counted
    /// as `limited.<name>` and named in the log line.
    private func refusal(by bucketKey: String, retryAfter: Int64, context: Context) -> HTTPError {
        let limit = String(bucketKey.prefix { $0 != ":" })
        metrics.count(Counters.Name.limited(limit), at: context.now)
        return .rateLimited(retryAfter: retryAfter, limit: limit)
    }

    /// 429 when `bucket` has no unit free (here, in a lease, or in the store), without taking one:
    /// the request is charged once it has cost something (a refresh: in its rotation's
    /// transaction, `rotationCharge`).
    func requireRoom(_ bucket: LimitBucket, context: Context) throws(HTTPError) {
        guard bucket.quota.isEnabled, (leases[bucket.key]?.units ?? 0) == 0 else { return }
        let wait: Int64
        do { wait = try store.wait(for: bucket, nowMs: context.now.seconds * 1000) } catch { throw .storageUnavailable }
        guard wait > 0 else { return }
        throw refusal(by: bucket.key, retryAfter: wait, context: context)
    }

    /// What a rotation takes of `bucket` in its own transaction, and only if it rotates
    /// (`GatewayStore.rotate`): one unit, no lease (a session's refreshes are never busy enough
    /// for one, so refresh buckets are never leased). Nil when the bucket is off.
    func rotationCharge(_ bucket: LimitBucket, context: Context) -> LimitCharge? {
        guard bucket.quota.isEnabled else { return nil }
        return LimitCharge(buckets: [bucket], extra: [0], nowMs: context.now.seconds * 1000)
    }

    /// `check` of `buckets`, then the distinct-cell quota of `cell` for the session. A request the
    /// cell quota refuses is charged to none of the buckets: their units go back.
    ///
    /// When both kinds refuse, `Retry-After` is the longer wait (README: the longest of every
    /// refusing quota's), read without a write: a client told the hourly bucket's minutes would
    /// come back to the cell quota's refusal of up to a day, and one told the cells' last second
    /// to an empty bucket (a contract audit, session 30). The log line names the quota that
    /// refused first.
    func check(_ buckets: [LimitBucket], cell: String, sessionId: String, context: Context) throws(HTTPError) {
        do {
            try refuseIfFull(cell, sessionId: sessionId, context: context)
        } catch {
            guard error.status == 429 else { throw error }
            throw Self.waitingAtLeast(rateWait(buckets, context: context), error)
        }
        do {
            try check(buckets, context: context)
        } catch {
            guard error.status == 429 else { throw error }
            throw Self.waitingAtLeast(cellWait(cell, sessionId: sessionId, context: context), error)
        }
        do {
            try checkCell(cell, sessionId: sessionId, context: context)
        } catch {
            refund(buckets, context: context)
            throw error
        }
    }

    /// `error` with its `Retry-After` raised to `wait` when it is a 429 with a shorter one.
    private static func waitingAtLeast(_ wait: Int64, _ error: HTTPError) -> HTTPError {
        guard error.status == 429, let told = error.headers["Retry-After"].flatMap({ Int64($0) }), wait > told else { return error }
        return .rateLimited(retryAfter: wait, limit: error.reason ?? "")
    }

    /// The wait the distinct-cell quota would refuse `cell` with (a read), 0 when it would admit
    /// it or the cell counts already (as this worker remembers, no read at all).
    private func cellWait(_ cell: String, sessionId: String, context: Context) -> Int64 {
        let nowMs = context.now.seconds * 1000
        guard cellQuota.isEnabled else { return 0 }
        if let until = countedCells[CellKey(sessionId: sessionId, cell: cell)], nowMs < until { return 0 }
        return (try? store.cellRefusalWait(cell, sessionId: sessionId, quota: cellQuota, nowMs: nowMs)) ?? 0
    }

    /// The longest wait of the enabled `buckets` that have no unit free here or in the store
    /// (reads only), 0 when every one has room.
    private func rateWait(_ buckets: [LimitBucket], context: Context) -> Int64 {
        var longest: Int64 = 0
        for b in buckets where b.quota.isEnabled && (leases[b.key]?.units ?? 0) == 0 {
            if let wait = try? store.wait(for: b, nowMs: context.now.seconds * 1000) { longest = max(longest, wait) }
        }
        return longest
    }

    /// Gives back the unit `check` just took from each of `buckets`: to this worker's lease where
    /// there is one, else to the shared bucket (one write, on refusals only).
    private func refund(_ buckets: [LimitBucket], context: Context) {
        var toStore: [(bucket: LimitBucket, units: Int)] = []
        for b in buckets where b.quota.isEnabled {
            if let lease = leases[b.key] { lease.units += 1 } else { toStore.append((b, 1)) }
        }
        guard !toStore.isEmpty else { return }
        try? store.giveBack(toStore, nowMs: context.now.seconds * 1000)  // lost on a storage error: the request was refused anyway
    }

    /// A session whose cells were found full here asks for a cell not counted here: one read
    /// tells whether another worker counted it; if not, 429 until the oldest cell stops counting,
    /// charged to no rate bucket.
    private func refuseIfFull(_ cell: String, sessionId: String, context: Context) throws(HTTPError) {
        guard !fullSessions.isEmpty, let fullUntil = fullSessions[sessionId] else { return }  // no hashing when none is full
        let nowMs = context.now.seconds * 1000
        // Past, or further ahead than the window (found full under a clock since set back).
        guard nowMs < fullUntil, fullUntil - nowMs <= cellQuota.window * 1000 else {
            fullSessions[sessionId] = nil
            return
        }
        let key = CellKey(sessionId: sessionId, cell: cell)
        if let until = countedCells[key], nowMs < until { return }
        let counted: Int64?
        do { counted = try store.cellCountedUntil(cell, sessionId: sessionId, quota: cellQuota, nowMs: nowMs) } catch { throw .storageUnavailable }
        if let counted {
            remember(key, countedUntil: counted)
            return
        }
        throw refusal(by: "cells", retryAfter: max(1, (fullUntil - nowMs + 999) / 1000), context: context)
    }

    private func remember(_ key: CellKey, countedUntil until: Int64) {
        if countedCells.count >= Self.tableLimit { countedCells.removeAll(keepingCapacity: true) }
        countedCells[key] = until
    }

    /// The distinct-cell quota of a session.
    private func checkCell(_ cell: String, sessionId: String, context: Context) throws(HTTPError) {
        let nowMs = context.now.seconds * 1000
        let key = CellKey(sessionId: sessionId, cell: cell)
        if let until = countedCells[key], nowMs < until { return }
        let admission: CellAdmission
        do { admission = try store.admitCell(cell, sessionId: sessionId, quota: cellQuota, nowMs: nowMs) } catch { throw .storageUnavailable }
        switch admission {
        case .admitted(let until):
            remember(key, countedUntil: until)
        case .refused(let retryAfter, let bucket):
            if fullSessions.count >= Self.tableLimit { fullSessions.removeAll(keepingCapacity: true) }
            fullSessions[sessionId] = nowMs + retryAfter * 1000
            throw refusal(by: bucket, retryAfter: retryAfter, context: context)
        }
    }

    /// Gives back the unused units of leases that have ended (all of them with `all`, when the
    /// worker stops). Runs after the response; a storage error keeps them for the next try.
    func returnLeases(nowMs: Int64, all: Bool = false) {
        guard !leases.isEmpty, all || nowMs >= firstEndMs else { return }
        let ended = leases.values.filter { all || $0.endsMs <= nowMs }
        do {
            try store.giveBack(ended.map { ($0.bucket, $0.units) }, nowMs: nowMs)
            for l in ended { leases[l.bucket.key] = nil }
        } catch {
            // Kept: they are still this worker's to spend or to give back later.
        }
        firstEndMs = leases.values.map(\.endsMs).min() ?? .max
    }

    /// The earliest end of a lease held, so that most responses skip `returnLeases` at once.
    private var firstEndMs: Int64 = .max

    /// Units this worker holds ahead (tests).
    func leasedUnits(_ key: String) -> Int { leases[key]?.units ?? 0 }
}
