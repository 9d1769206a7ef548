import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// The gateway's storage on one SQLite connection (one per worker process).
public final class SQLiteGatewayStore: GatewayStore {
    public private(set) var db: Database
    /// Where to reopen from after a storage fault (nil for a wrapped connection).
    private let path: String?
    /// Set when the file system refused a write or read (read-only, I/O error): the connection may
    /// have cached that state, so the next call opens a fresh one once the disk is back. Until a
    /// reopening works, `db` is the closed connection (`Database.isClosed`). Tests set it to stand
    /// for a fault.
    var needsReopen = false
    /// SQLite said the file is damaged (CORRUPT, NOTADB): health says so from then on, where it
    /// answered 200 while every write failed (a disaster-recovery drill). Damage does not mend
    /// itself; a restart after the restore clears it.
    private(set) var sawDamage = false
    public private(set) var lastFailure: StoreError?
    /// The migrations this opening applied, in order (empty when the database was up to date):
    /// the worker says them once in its log, where an upgrade's schema change went unrecorded.
    public private(set) var appliedMigrations: [String] = []

    /// Opens the database and applies pending migrations (safe when several workers start at once).
    /// Writers queue for each other and checkpoints wait for `afterResponse`
    /// (`Database.queueWritersAndDeferCheckpoints`).
    public init(path: String) throws {
        // Migrations run on a connection of SQLite's own VFS: one may write more pages than any
        // cache holds (an index built over a big table), and a connection of the per-commit VFS
        // (`cache_spill=OFF`) would keep every one of them in memory until its commit.
        Self.mendSidecarModes(path)
        do {
            let migrating = try Database(path: path, gatewayFile: true)
            defer { migrating.close() }
            appliedMigrations = try Migrator.apply(to: migrating)
        }
        db = try Database(path: path, walWrites: .perCommit, gatewayFile: true)
        self.path = path
        needsReopen = db.isReadOnly
        db.queueWritersAndDeferCheckpoints()
    }

    /// Gives `-wal` and `-shm` the database's mode again where they lost its owner's write and the
    /// database has it: SQLite creates them with the database's mode, so a worker that started
    /// while the database was read-only for a moment (`chmod 0444`) left a `-wal` of 0444, and
    /// once the database was writable again every worker that opened it after (and `weatherctl
    /// revoke`) met "attempt to write a readonly database" (a re-check of an incident drill).
    /// Only files this process owns; nothing else is changed. Called before this process opens
    /// the database: closing a descriptor of `-shm` drops every POSIX lock the process holds on
    /// it (SQLite's), so a file is opened only when its mode needs mending (a review).
    static func mendSidecarModes(_ path: String) {
        var db = stat()
        guard stat(path, &db) == 0, db.st_mode & 0o200 != 0 else { return }
        for suffix in ["-wal", "-shm"] {
            var seen = stat()
            guard lstat(path + suffix, &seen) == 0, seen.st_mode & S_IFMT == S_IFREG, seen.st_mode & 0o200 == 0 else { continue }
            // Opened without following a link and changed through that descriptor: nothing
            // swapped in meanwhile gets the mode (a review).
            let fd = open(path + suffix, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var st = stat()
            guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(), st.st_mode & 0o200 == 0 else { continue }
            _ = fchmod(fd, db.st_mode & 0o666)
        }
    }

    /// Wraps an open database without migrating (weatherctl). Its revocations still reach the
    /// workers' grant caches through the `-writer` page; a read-only opening reads the page (the
    /// provider pauses) only if it exists, rather than create it (as root, with root as its
    /// owner, shutting the service's workers out of it).
    public convenience init(database: Database) {
        self.init(database: database, attachingWriterPage: true)
    }

    /// Wraps an open database; without `attachingWriterPage`, for work that revokes nothing and
    /// reads no provider pause (a worker's clean-up).
    init(database: Database, attachingWriterPage: Bool) {
        db = database
        path = nil
        if attachingWriterPage { db.attachWriterPage(create: !database.isReadOnly) }
    }

    /// Access grants this worker looked up, by token digest, valid while the revocation generation
    /// they were read under has not moved (see `accessGrant`).
    private var grants: [TokenDigest: AccessGrant] = [:]
    private var grantsGeneration: UInt64 = 0
    /// The most grants kept: room for the tokens a busy worker sees within an access token's
    /// lifetime. 3,072 is the most a table of 4,096 slots holds (a Swift dictionary doubles its
    /// slots when it passes three quarters full), so one more would double its memory: valgrind's
    /// massif found 4,096 grants in 8,192 slots of 80 bytes (656 KB), where 3,072 take 328 KB,
    /// plus a session-id string of about 48 bytes each. When it is full, one arbitrary grant makes
    /// room for the new one; clearing them all (as before) meant that a worker seeing more tokens
    /// than this in turn found none of them kept.
    public var grantCacheLimit = 3072
    /// How many grants are kept now.
    public var keptGrantCount: Int { grants.count }
    static let clockSlackMs = Timestamp.slackSeconds * 1000

    /// Tests only: runs between a rotation's lookup and its write transaction, where another
    /// worker may spend or revoke the same token.
    var betweenRotationReadAndWrite: (() -> Void)?
    /// Tests only: runs between a cell admission's read and its write transaction, where another
    /// worker may count the same cell.
    var betweenCellReadAndWrite: (() -> Void)?
    /// Tests only: runs as a fetch claim is asked for, where another worker may just have stored
    /// the cell and let its own claim go.
    var beforeFetchClaim: (() -> Void)?

    // MARK: Sessions and tokens

    public func createSession(_ s: NewSession, tokens: IssuedPair, charging charge: LimitCharge?) throws(StoreError) -> LimitGrant {
        try write { () throws -> LimitGrant in
            let grant = try charge.map { try takeUnits($0.buckets, extra: $0.extra, nowMs: $0.nowMs) } ?? .granted([])
            guard case .granted = grant else { return grant }
            let now = s.createdAt.iso8601
            try db.run(
                "INSERT INTO anonymous_weather_sessions(id, installation_id_hash, platform, app_version, status, created_at, last_seen_at) VALUES (?1, ?2, ?3, ?4, 'active', ?5, ?5)",
                [.text(s.id), .text(s.installationIdHash), .text(s.platform), s.appVersion.map(SQLValue.text) ?? .null, .text(now)])
            try insertPair(sessionId: s.id, tokens)
            return grant
        }
    }

    private func insertPair(sessionId: String, _ p: IssuedPair) throws {
        let sql = "INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
        let created = p.lifetimes.issuedAt.iso8601
        try db.run(sql, [.text(p.accessRowId), .text(sessionId), .text(p.accessHash), "access", .text(p.lifetimes.accessExpiresAt.iso8601), .text(created)])
        try db.run(
            sql, [.text(p.refreshRowId), .text(sessionId), .text(p.refreshHash), "refresh", .text(p.lifetimes.refreshExpiresAt.iso8601), .text(created)])
    }

    /// A grant changes in only two ways: it expires (the caller checks `expiresAt`) or it is
    /// revoked, and every revocation moves the shared revocation generation after its commit. So
    /// a grant read here is kept and reused until that counter moves, and a cached weather
    /// request's session check costs no SQLite statement at all (nor do its quotas: the shared
    /// rate table, `SharedRateTable`). A request that races a revocation may still see
    /// the grant, as if it had arrived a moment earlier. Revocations made behind the gateway's
    /// back (the sqlite3 shell) are not seen until a worker restarts: use weatherctl.
    public func accessGrant(token: TokenDigest) throws(StoreError) -> AccessGrant? {
        let generation = db.revocationGeneration
        if let generation {
            if generation != grantsGeneration {
                grants.removeAll(keepingCapacity: true)
                grantsGeneration = generation
            } else if let grant = grants[token] {
                return grant
            }
        }
        let grant = try lookUpGrant(tokenHash: token.hex)
        if let grant, generation != nil {
            if grants.count >= grantCacheLimit { grants.remove(at: grants.startIndex) }
            grants[token] = grant
        }
        return grant
    }

    private func lookUpGrant(tokenHash: String) throws(StoreError) -> AccessGrant? {
        try read {
            let s = try db.statement(
                """
                SELECT t.session_id, t.token_type, t.expires_at, t.revoked_at IS NOT NULL, s.status = 'active', s.last_seen_at
                FROM weather_session_tokens t JOIN anonymous_weather_sessions s ON s.id = t.session_id
                WHERE t.token_hash = ?1
                """)
            try s.bind([.text(tokenHash)])
            defer { s.reset() }
            guard try s.step() else { return nil }
            return AccessGrant(
                sessionId: s.text(0) ?? "",
                tokenType: s.text(1).flatMap(TokenKind.init(rawValue:)),
                expiresAt: s.text(2).flatMap { Timestamp(iso8601: $0) } ?? Timestamp(seconds: 0),
                tokenRevoked: s.int(3) != 0,
                sessionActive: s.int(4) != 0,
                lastSeenAt: s.text(5).flatMap { Timestamp(iso8601: $0) } ?? Timestamp(seconds: 0))
        }
    }

    /// The token is looked up before the write lock is taken, so writers queue only for the
    /// writes: the search of the token_hash index and the session join, which read pages that
    /// another worker's commit has usually just evicted from this connection's cache, stay
    /// outside it. A token that is invalid now stays invalid (its row, type, session and expiry
    /// never change, and a revoked session never comes back), so it needs no write at all.
    public func presentedRefreshToken(hash refreshTokenHash: String, sessionId: String, now: Timestamp) throws(StoreError) -> PresentedRefreshToken? {
        guard let seen = try read({ try refreshTokenRow(hash: refreshTokenHash) }), seen.isValid(for: sessionId, now: now) else { return nil }
        return PresentedRefreshToken(hash: refreshTokenHash, sessionId: sessionId, row: seen.rowid, spent: seen.revoked != nil)
    }

    public func rotate(_ presented: PresentedRefreshToken, successor: IssuedPair, retryWindow: Int64, now: Timestamp, charging charge: LimitCharge?)
        throws(StoreError) -> RotationOutcome
    {
        let refreshTokenHash = presented.hash, sessionId = presented.sessionId
        // Spent when it was read: the same request again inside the window is answered from a
        // read, with no write lock (no quota is charged for it, so its repeats must cost no more
        // than a wrong token's); a replay goes on to revoke the session below.
        if presented.spent,
            let lifetimes = try read({ () throws -> TokenLifetimes? in
                guard let row = try refreshTokenRow(hash: refreshTokenHash), row.isValid(for: sessionId, now: now), let rotatedAt = row.revoked else {
                    return nil
                }
                return try retriedLifetimes(rotatedAt: rotatedAt, sessionId: sessionId, successor: successor, retryWindow: retryWindow, now: now)
            })
        {
            return .retried(lifetimes)
        }
        betweenRotationReadAndWrite?()
        let outcome = try write { () throws -> RotationOutcome in
            if !presented.spent {
                // Still unspent unless another request spent it or a revocation landed since the
                // read: the conditional update tells, and then the full check below decides.
                let spent = try db.run(
                    "UPDATE weather_session_tokens SET revoked_at = ?2 WHERE rowid = ?1 AND revoked_at IS NULL AND token_hash = ?3 AND session_id = ?4",
                    [.int(presented.row), .text(now.iso8601), .text(refreshTokenHash), .text(sessionId)])
                if spent == 1 {
                    // last_seen_at moves with the worker's next batch (Metrics), not here.
                    try insertPair(sessionId: sessionId, successor)
                    try chargeIfRoom(charge)
                    return .rotated
                }
            }
            guard let row = try refreshTokenRow(hash: refreshTokenHash), row.isValid(for: sessionId, now: now) else { return .invalid }
            guard let rotatedAt = row.revoked else {
                try db.run("UPDATE weather_session_tokens SET revoked_at = ?2 WHERE rowid = ?1", [.int(row.rowid), .text(now.iso8601)])
                try insertPair(sessionId: sessionId, successor)
                try chargeIfRoom(charge)
                return .rotated
            }
            if let lifetimes = try retriedLifetimes(rotatedAt: rotatedAt, sessionId: sessionId, successor: successor, retryWindow: retryWindow, now: now) {
                return .retried(lifetimes)
            }
            try revokeAll(sessionId: sessionId, now: now)
            return .reused
        }
        return outcome
    }

    /// For a token rotated at `rotatedAt`, presented again now: the lifetimes of the pair that
    /// rotation issued when this is the same request again inside the retry window and that
    /// pair's refresh token is still unspent; nil for a replay. The successor is derived from this
    /// very token, so its hash tells whether this is the same request, without any plaintext
    /// having been kept. A window of 0 turns retries off, even within the second of the rotation.
    /// A rotation more than a minute ahead of now happened under a clock since set back: not
    /// inside the window (with no lower bound, every replay was a "retry" for as long as the
    /// clock read earlier: weeks after a month's step, a black-box clock test).
    private func retriedLifetimes(rotatedAt: Timestamp, sessionId: String, successor: IssuedPair, retryWindow: Int64, now: Timestamp) throws -> TokenLifetimes?
    {
        guard retryWindow > 0, (-Self.clockSlackMs / 1000...retryWindow).contains(now.seconds - rotatedAt.seconds),
            let issued = try db.scalarText(
                "SELECT created_at FROM weather_session_tokens WHERE token_hash = ?1 AND session_id = ?2 AND revoked_at IS NULL",
                [.text(successor.refreshHash), .text(sessionId)]),
            let issuedAt = Timestamp(iso8601: issued)
        else { return nil }
        return successor.lifetimes.issued(at: issuedAt)
    }

    /// A token row as rotation judges it.
    private struct RefreshTokenRow {
        var rowid: Int64
        var session: String
        var type: String
        var expires: Timestamp?
        var revoked: Timestamp?
        var sessionActive: Bool

        /// A refresh token of this session, the session active, the token not expired.
        func isValid(for sessionId: String, now: Timestamp) -> Bool {
            guard type == "refresh", session == sessionId, sessionActive, let expires else { return false }
            return now < expires
        }
    }

    public func refreshRefusal(hash refreshTokenHash: String, sessionId: String, now: Timestamp) -> String {
        guard let row = try? read({ try refreshTokenRow(hash: refreshTokenHash) }), row.type == "refresh" else { return "unknown" }
        if row.session != sessionId { return "other_session" }
        if !row.sessionActive { return "revoked" }
        return row.expires.map { now < $0 } == true ? "unknown" : "expired"
    }

    private func refreshTokenRow(hash: String) throws -> RefreshTokenRow? {
        let s = try db.statement(
            """
            SELECT t.rowid, t.session_id, t.token_type, t.expires_at, t.revoked_at, s.status
            FROM weather_session_tokens t JOIN anonymous_weather_sessions s ON s.id = t.session_id
            WHERE t.token_hash = ?1
            """)
        return try s.rows([.text(hash)]) { r in
            RefreshTokenRow(
                rowid: r.int(0), session: r.text(1) ?? "", type: r.text(2) ?? "",
                expires: r.text(3).flatMap { Timestamp(iso8601: $0) }, revoked: r.text(4).flatMap { Timestamp(iso8601: $0) },
                sessionActive: r.text(5) == "active")
        }.first
    }

    /// The pair is checked before the write lock, as refresh checks its token: a wrong pair costs
    /// a read, and a session already revoked is done (no write, and no new revocation for every
    /// worker's grants; repeating the call used to empty them each time). Only the owner of a
    /// refresh token of the session can get here, and a revoked session never comes back, so
    /// what the read saw still holds when the write runs.
    public func revokeSession(sessionId: String, presentingRefreshTokenHash: String, now: Timestamp) throws(StoreError) -> SessionRevocation {
        guard let row = try read({ try refreshTokenRow(hash: presentingRefreshTokenHash) }),
            row.type == "refresh", row.session == sessionId
        else { return .notProven }
        guard row.sessionActive else { return .alreadyRevoked }
        try write { try revokeAll(sessionId: sessionId, now: now) }
        return .revoked
    }

    public func revokeSession(id: String, now: Timestamp) throws(StoreError) -> Bool {
        let revoked = try write {
            guard try db.scalarInt("SELECT 1 FROM anonymous_weather_sessions WHERE id = ?1", [.text(id)]) != nil else { return false }
            try revokeAll(sessionId: id, now: now)
            return true
        }
        return revoked
    }

    /// Inside a `write`: the revocation is announced to every worker at its commit
    /// (`Database.noteRevocation`).
    private func revokeAll(sessionId: String, now: Timestamp) throws {
        try db.run(
            "UPDATE anonymous_weather_sessions SET status = 'revoked', revoked_at = coalesce(revoked_at, ?2) WHERE id = ?1",
            [.text(sessionId), .text(now.iso8601)])
        try db.run(
            "UPDATE weather_session_tokens SET revoked_at = ?2 WHERE session_id = ?1 AND revoked_at IS NULL",
            [.text(sessionId), .text(now.iso8601)])
        db.noteRevocation()
    }

    public func touchSessions(_ seen: [String: Timestamp]) throws(StoreError) {
        guard !seen.isEmpty else { return }
        try write {
            for (id, t) in seen {
                try db.run(
                    "UPDATE anonymous_weather_sessions SET last_seen_at = ?2 WHERE id = ?1 AND last_seen_at < ?2",
                    [.text(id), .text(t.iso8601)])
            }
        }
        // Cached grants carry last_seen_at; keep them as new as the row. In place, by index: a
        // `for (key, grant) in grants` loop holds the dictionary while the body changes it, so
        // the first change copied all 4,096 grants (0.5 MB, after every chunk of touches).
        var i = grants.startIndex
        while i != grants.endIndex {
            if let t = seen[grants.values[i].sessionId], grants.values[i].lastSeenAt < t { grants.values[i].lastSeenAt = t }
            grants.formIndex(after: &i)
        }
    }

    // MARK: Limits

    public func take(_ buckets: [LimitBucket], extra: [Int], nowMs: Int64) throws(StoreError) -> LimitGrant {
        guard buckets.contains(where: \.quota.isEnabled) else { return .granted(buckets.map { _ in 1 }) }
        if let grant = takeShared(buckets, extra: extra, nowMs: nowMs) { return grant }
        return try write { () throws -> LimitGrant in try takeStored(buckets, extra: extra, nowMs: nowMs) }
    }

    /// A rotation's charge: one unit of each bucket where every one has room, else nothing (see
    /// `rotate`); never a lease, whatever `extra` asks, since nobody would give it back.
    private func chargeIfRoom(_ charge: LimitCharge?) throws {
        guard let charge else { return }
        _ = try takeUnits(charge.buckets, extra: [], nowMs: charge.nowMs)
    }

    /// `take` inside the caller's write transaction: from the machine's shared table when there
    /// is one, given back if the transaction does not commit (`write`), else from SQLite in the
    /// transaction itself.
    private func takeUnits(_ buckets: [LimitBucket], extra: [Int], nowMs: Int64) throws -> LimitGrant {
        guard buckets.contains(where: \.quota.isEnabled) else { return .granted(buckets.map { _ in 1 }) }
        if let grant = takeShared(buckets, extra: extra, nowMs: nowMs, waiting: false) {
            if case .granted(let units) = grant { sharedTakesInWrite.append((buckets, units, nowMs)) }
            return grant
        }
        return try takeStored(buckets, extra: extra, nowMs: nowMs)
    }

    /// Units taken from the shared table inside the write transaction under way: given back when
    /// it rolls back, so that a creation that fails to store spends nothing, as when its units
    /// were rows of that transaction.
    private var sharedTakesInWrite: [(buckets: [LimitBucket], units: [Int], nowMs: Int64)] = []

    /// A take from the shared rate table (`SharedRateTable`): no SQLite statement at all. nil when
    /// there is no table or its lock could not be had.
    private func takeShared(_ buckets: [LimitBucket], extra: [Int], nowMs: Int64, waiting: Bool = true) -> LimitGrant? {
        guard let table = db.rateTable else { return nil }
        var grant = LimitGrant.granted([])
        let done = table.update(buckets.map(\.key), nowMs: nowMs, waiting: waiting) { tats in
            let decided = Self.decideTake(buckets, extra: extra, tats: tats, nowMs: nowMs)
            grant = decided.grant
            return decided.tats
        }
        return done ? grant : nil
    }

    /// A take from `weather_rate_limits`, inside the caller's write transaction.
    private func takeStored(_ buckets: [LimitBucket], extra: [Int], nowMs: Int64) throws -> LimitGrant {
        let tats = try buckets.map { b throws -> Int64? in b.quota.isEnabled ? try storedTAT(b.key) : nil }
        let decided = Self.decideTake(buckets, extra: extra, tats: tats, nowMs: nowMs)
        for (b, tat) in zip(buckets, decided.tats) {
            guard let tat else { continue }
            try db.run(
                "INSERT INTO weather_rate_limits(bucket_key, tat_ms) VALUES (?1, ?2) ON CONFLICT(bucket_key) DO UPDATE SET tat_ms = excluded.tat_ms",
                [.text(b.key), .int(tat)])
        }
        return decided.grant
    }

    /// What a take does to buckets whose TATs are `tats` (nil: never taken from): the grant, and
    /// each bucket's TAT to store (nil: unchanged; all nil when refused, since a request draws
    /// from all its buckets or from none).
    static func decideTake(_ buckets: [LimitBucket], extra: [Int], tats: [Int64?], nowMs: Int64) -> (grant: LimitGrant, tats: [Int64?]) {
        var units: [Int] = [], stored: [Int64?] = []
        for (i, b) in buckets.enumerated() {
            guard b.quota.isEnabled else {
                units.append(1)
                stored.append(nil)
                continue
            }
            let t = GCRA.take(tat: tats[i], nowMs: nowMs, quota: b.quota, upTo: 1 + (i < extra.count ? max(0, extra[i]) : 0))
            guard t.granted > 0 else {
                // Retry-After is the longest wait of every bucket that refuses: a client told
                // this bucket's wait alone would meet the next one's refusal (the README
                // promises the request then passes). Buckets before this one had room.
                var wait = (retryAfter: t.retryAfter, bucket: b.key)
                for j in (i + 1)..<buckets.count where buckets[j].quota.isEnabled {
                    let u = GCRA.take(tat: tats[j], nowMs: nowMs, quota: buckets[j].quota, upTo: 1)
                    if u.granted == 0, u.retryAfter > wait.retryAfter { wait = (u.retryAfter, buckets[j].key) }
                }
                return (.refused(retryAfter: wait.retryAfter, bucket: wait.bucket), buckets.map { _ in nil })
            }
            units.append(t.granted)
            stored.append(t.newTAT)
        }
        return (.granted(units), stored)
    }

    public func wait(for bucket: LimitBucket, nowMs: Int64) throws(StoreError) -> Int64 {
        guard bucket.quota.isEnabled else { return 0 }
        let tat = try rateState(bucket.key, nowMs: nowMs)
        let t = GCRA.take(tat: tat, nowMs: nowMs, quota: bucket.quota, upTo: 1)
        return t.granted > 0 ? 0 : t.retryAfter
    }

    /// A bucket's TAT as a take would find it (nil: never taken from, or full again by the
    /// shared table's reading): from the shared table when there is one, else from SQLite.
    func rateState(_ key: String, nowMs: Int64) throws(StoreError) -> Int64? {
        var tat: Int64?
        if let table = db.rateTable,
            table.update(
                [key], nowMs: nowMs,
                { tats in
                    tat = tats[0]; return [nil]
                })
        {
            return tat
        }
        return try read { try storedTAT(key) }
    }

    /// Buckets stored, in the shared table and in SQLite (tests).
    func storedRateBucketCount() throws -> Int {
        (db.rateTable?.usedSlots ?? 0) + Int(try db.scalarInt("SELECT count(*) FROM weather_rate_limits") ?? 0)
    }

    /// A bucket's theoretical arrival time (GCRA) in `weather_rate_limits`, nil before its first take.
    private func storedTAT(_ key: String) throws(DatabaseError) -> Int64? {
        try db.scalarInt("SELECT tat_ms FROM weather_rate_limits WHERE bucket_key = ?1", [.text(key)])
    }

    public func giveBack(_ leftovers: [(bucket: LimitBucket, units: Int)], nowMs: Int64) throws(StoreError) {
        let returns = leftovers.filter { $0.units > 0 && $0.bucket.quota.isEnabled }
        guard !returns.isEmpty else { return }
        // With the table, to the table or nowhere: units leased from SQLite while the table's
        // lock was held (a stopped process) are not credited to the table, which never lost them,
        // nor the table's to SQLite's rows; a give-back that finds the lock held is dropped, which
        // errs on the side of the quota (at most a lease's leftovers, for up to an hour).
        if db.rateTable != nil {
            giveBackShared(returns, nowMs: nowMs)
            return
        }
        try write {
            for r in returns {
                guard let tat = try storedTAT(r.bucket.key) else { continue }
                try db.run(
                    "UPDATE weather_rate_limits SET tat_ms = ?2 WHERE bucket_key = ?1",
                    [.text(r.bucket.key), .int(GCRA.giveBack(tat: tat, units: r.units, nowMs: nowMs, quota: r.bucket.quota))])
            }
        }
    }

    /// `giveBack` to the shared table; dropped when there is none or its lock could not be had.
    private func giveBackShared(_ returns: [(bucket: LimitBucket, units: Int)], nowMs: Int64) {
        guard let table = db.rateTable else { return }
        _ = table.update(returns.map(\.bucket.key), nowMs: nowMs) { tats in
            zip(returns, tats).map { r, tat in tat.map { GCRA.giveBack(tat: $0, units: r.units, nowMs: nowMs, quota: r.bucket.quota) } }
        }
    }

    public func admitCell(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> CellAdmission {
        guard quota.isEnabled else { return .admitted(countedUntilMs: .max) }
        let windowMs = quota.window * 1000
        // The common case, a cell already seen today, is one read and no write.
        if let until = try cellCountedUntil(cell, sessionId: sessionId, quota: quota, nowMs: nowMs) { return .admitted(countedUntilMs: until) }
        betweenCellReadAndWrite?()
        return try write { () throws -> CellAdmission in
            // Read again under the lock: another worker may have counted this very cell since
            // (two requests for one new cell at once), and it must not count as one more.
            if let until = try countedUntil(cell, sessionId: sessionId, windowMs: windowMs, nowMs: nowMs) { return .admitted(countedUntilMs: until) }
            if let wait = try fullWait(sessionId: sessionId, quota: quota, nowMs: nowMs) {
                return .refused(retryAfter: wait, bucket: "cells:\(sessionId)")
            }
            try db.run(
                "INSERT INTO weather_session_cells(session_id, cell, first_seen_ms) VALUES (?1, ?2, ?3) ON CONFLICT(session_id, cell) DO UPDATE SET first_seen_ms = excluded.first_seen_ms",
                [.text(sessionId), .text(cell), .int(nowMs)])
            return .admitted(countedUntilMs: nowMs + windowMs)
        }
    }

    public func cellCountedUntil(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> Int64? {
        try read { try countedUntil(cell, sessionId: sessionId, windowMs: quota.window * 1000, nowMs: nowMs) }
    }

    public func cellRefusalWait(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> Int64? {
        guard quota.isEnabled else { return nil }
        return try read { () throws -> Int64? in
            guard try countedUntil(cell, sessionId: sessionId, windowMs: quota.window * 1000, nowMs: nowMs) == nil else { return nil }
            return try fullWait(sessionId: sessionId, quota: quota, nowMs: nowMs)
        }
    }

    /// Seconds until the session's oldest counted cell stops counting, when it has as many as
    /// `quota` allows; nil while there is room. Cells first seen after now were counted under a
    /// clock since set back: they do not count (their wait would outlast the window), and are
    /// counted anew if asked again.
    private func fullWait(sessionId: String, quota: Quota, nowMs: Int64) throws -> Int64? {
        let windowStart = nowMs - quota.window * 1000
        let s = try db.statement(
            "SELECT count(*), min(first_seen_ms) FROM weather_session_cells WHERE session_id = ?1 AND first_seen_ms > ?2 AND first_seen_ms <= ?3")
        let (count, oldest) = try s.rows([.text(sessionId), .int(windowStart), .int(nowMs + Self.clockSlackMs)]) { ($0.int(0), $0.int(1)) }.first ?? (0, 0)
        guard count >= Int64(quota.limit) else { return nil }
        let waitMs = oldest + quota.window * 1000 - nowMs
        return max(1, (waitMs + 999) / 1000)
    }

    private func countedUntil(_ cell: String, sessionId: String, windowMs: Int64, nowMs: Int64) throws -> Int64? {
        let seen = try db.scalarInt(
            "SELECT first_seen_ms FROM weather_session_cells WHERE session_id = ?1 AND cell = ?2",
            [.text(sessionId), .text(cell)])
        guard let seen, seen > nowMs - windowMs, seen <= nowMs + Self.clockSlackMs else { return nil }
        return seen + windowMs
    }

    // MARK: Weather cache

    public func cachedWeather(key: String, now: Timestamp) throws(StoreError) -> CachedWeather? {
        try read {
            let s = try db.statement(
                "SELECT body, fetched_at, fresh_until, first_day_ends_at FROM weather_cache WHERE cache_key = ?1 AND stale_until > ?2")
            return try s.rows([.text(key), .int(now.seconds)]) {
                CachedWeather(
                    body: $0.blob(0), fetchedAt: Timestamp(seconds: $0.int(1)), freshUntil: Timestamp(seconds: $0.int(2)),
                    firstDayEndsAt: $0.isNull(3) ? nil : $0.int(3))
            }.first
        }
    }

    public func storeWeather(key: String, body: [UInt8], fetchedAt: Timestamp, freshUntil: Timestamp, staleUntil: Timestamp, firstDayEndsAt: Int64?)
        throws(StoreError)
    {
        try write {
            try db.run(
                "INSERT OR REPLACE INTO weather_cache(cache_key, body, fetched_at, fresh_until, stale_until, first_day_ends_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                [
                    .text(key), .blob(body), .int(fetchedAt.seconds), .int(freshUntil.seconds), .int(staleUntil.seconds),
                    firstDayEndsAt.map { .int($0) } ?? .null,
                ])
        }
    }

    public func acquireFetchLock(key: String, owner: String, now: Timestamp, until: Timestamp) throws(StoreError) -> Bool {
        beforeFetchClaim?()
        return try write {
            if try db.run(
                "INSERT INTO weather_fetch_locks(cache_key, owner, expires_at) VALUES (?1, ?2, ?3) ON CONFLICT(cache_key) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at WHERE weather_fetch_locks.expires_at <= ?4 OR weather_fetch_locks.expires_at > ?5",
                [.text(key), .text(owner), .int(until.seconds), .int(now.seconds), .int(until.seconds + FetchLockState.implausibleSeconds)]) == 1
            {
                return true
            }
            // Held: taken over only from a worker that has ended (killed mid-fetch), whose claim
            // would otherwise keep every request for this cell waiting until it ran out.
            guard let holder = try db.scalarText("SELECT owner FROM weather_fetch_locks WHERE cache_key = ?1", [.text(key)]),
                Self.hasEnded(holder)
            else { return false }
            return try db.run(
                "UPDATE weather_fetch_locks SET owner = ?2, expires_at = ?3 WHERE cache_key = ?1 AND owner = ?4",
                [.text(key), .text(owner), .int(until.seconds), .text(holder)]) == 1
        }
    }

    public func fetchLockState(key: String, now: Timestamp, until: Timestamp) throws(StoreError) -> FetchLockState {
        let claim: (expires: Int64, owner: String)? = try read {
            let s = try db.statement("SELECT expires_at, owner FROM weather_fetch_locks WHERE cache_key = ?1")
            try s.bind([.text(key)])
            defer { s.reset() }
            guard try s.step() else { return nil }
            return (s.int(0), s.text(1) ?? "")
        }
        guard let claim else { return .released }
        if claim.expires <= now.seconds || claim.expires > until.seconds + FetchLockState.implausibleSeconds { return .expired }
        return Self.hasEnded(claim.owner) ? .abandoned : .held
    }

    /// Whether a claim's owner is a process of this machine that no longer runs: every worker
    /// sharing a SQLite file runs on its machine. Only a definite "no such process" counts (a
    /// process of another user answers EPERM: alive); a killed worker is a zombie, and so still
    /// there, until its supervisor reaps it within 50 ms.
    static func hasEnded(_ owner: String) -> Bool {
        guard let pid = FetchLockOwner.pid(of: owner) else { return false }
        return kill(pid, 0) == -1 && errno == ESRCH
    }

    public func releaseFetchLock(key: String, owner: String) throws(StoreError) {
        try write {
            try db.run("DELETE FROM weather_fetch_locks WHERE cache_key = ?1 AND owner = ?2", [.text(key), .text(owner)])
        }
    }

    // MARK: Counters and health

    public func addCounters(_ counts: [CounterKey: Int64]) throws(StoreError) {
        guard !counts.isEmpty else { return }
        try write {
            for (k, v) in counts where v != 0 {
                try db.run(
                    "INSERT INTO weather_counters(hour, name, value) VALUES (?1, ?2, ?3) ON CONFLICT(hour, name) DO UPDATE SET value = value + excluded.value",
                    [.text(k.hour), .text(k.name), .int(v)])
            }
        }
    }

    public func afterResponse() {
        db.checkpointIfDue()
        _ = takeWriteWait()  // the writes after a response are no request's wait
    }

    public func takeWriteWaitMs() -> Int64 { Int64(takeWriteWait() / 1_000_000) }

    /// Nanoseconds waited for the write lock since the last call, the replaced connections'
    /// waits included; starts counting again.
    private func takeWriteWait() -> UInt64 {
        defer { waitOfClosedConnections = 0 }
        return db.takeWriteWait() + waitOfClosedConnections
    }

    /// Write waits of a connection `reopenIfFaulted` replaced since the last `takeWriteWaitMs`:
    /// a write that queued for seconds and then failed read-only is the one whose wait matters.
    private var waitOfClosedConnections: UInt64 = 0

    public func pruneIfDue(now: Timestamp, interval: Int64, policy: PrunePolicy) throws(StoreError) -> PruneReport? {
        let dueBefore = now.seconds - interval, setBackAfter = now.seconds + 3600
        func due(_ started: Int64?) -> Bool { started.map { $0 <= dueBefore || $0 > setBackAfter } ?? true }
        guard due(try read { try db.scalarInt("SELECT started_at FROM weather_maintenance WHERE task = 'prune'") }),
            try write({ try db.run(Self.recordPrune, [.int(now.seconds), .int(dueBefore), .int(setBackAfter)]) }) == 1
        else { return nil }
        // Cut short or failed: due again at the next look (a worker's next hour), not a whole
        // interval later. False when even that write failed (the database refusing writes).
        func dueAgain() -> Bool {
            (try? write {
                try db.run("UPDATE weather_maintenance SET started_at = ?2 WHERE task = 'prune' AND started_at = ?1", [.int(now.seconds), .int(dueBefore)])
            }) != nil
        }
        do throws(StoreError) {
            let report: PruneReport
            // On a connection of SQLite's own VFS, opened for the run: a worker's connection keeps
            // a transaction's pages in memory until its commit (`cache_spill` off), and a
            // statement of the small tables deletes up to 5,000 rows.
            if let path {
                let cleaner: Database
                // Not created either: a file moved away meanwhile is an error, not an empty database.
                do { cleaner = try Database(path: path, gatewayFile: true, create: false) } catch { throw Self.storeError(error) }
                defer { cleaner.close() }
                report = try SQLiteGatewayStore(database: cleaner, attachingWriterPage: false).prune(now: now, policy: policy, dryRun: false)
                _ = db.rateTable?.forgetLapsed(nowMs: now.seconds * 1000)
            } else {
                report = try prune(now: now, policy: policy, dryRun: false)
            }
            var told = report
            if !report.complete { told.dueAgainAtNextLook = dueAgain() }
            return told
        } catch {
            _ = dueAgain()  // failing too, it leaves the run due a whole interval later
            throw error
        }
    }

    /// A CGI process or a stopping worker exits right after its last response: without waiting,
    /// a checkpoint it asked for would die with it, and a CGI deployment (one process per
    /// request) would let the WAL grow.
    public func finishHousekeeping() { db.waitForCheckpoints() }

    /// Workers stop together, and SQLite empties the WAL only at the close of a database's last
    /// connection, which each worker took the other's to be: a disaster-recovery drill found
    /// the newest sessions in the `-wal` alone after 3 of 6 clean stops, and a database moved
    /// as a file without it had lost them. So each worker empties it itself (a TRUNCATE
    /// checkpoint that waits briefly for readers; another worker still serving may write more,
    /// which the last one to stop empties) and closes.
    public func closeForStop() {
        db.waitForCheckpoints()
        db.truncateWAL()
        db.close()
    }

    /// On the `-writer` page beside the database, which every worker of the machine maps.
    public var providerPauses: (any ProviderPauseBoard)? { db.providerPauses }

    public func holdsAnySession() throws(StoreError) -> Bool {
        try read { try db.scalarInt("SELECT 1 FROM anonymous_weather_sessions LIMIT 1") != nil }
    }

    public func recordedHashKey() throws(StoreError) -> (fingerprint: String, recordedAt: Timestamp)? {
        try read {
            // A copy from before migration 0007, read as it is (`weatherctl`), records none.
            guard try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'weather_hash_key'") != nil else { return nil }
            let s = try db.statement("SELECT fingerprint, recorded_at FROM weather_hash_key WHERE id = 1")
            return try s.rows { (fingerprint: $0.text(0) ?? "", recordedAt: Timestamp(seconds: $0.int(1))) }.first
        }
    }

    public func recordHashKey(fingerprint: String, when: HashKeyRecording, now: Timestamp) throws(StoreError) -> String {
        let sql =
            switch when {
            case .ifNoneRecorded: "INSERT OR IGNORE INTO weather_hash_key(id, fingerprint, recorded_at) VALUES (1, ?1, ?2)"
            case .whileNoSessionIsStored:
                "INSERT OR REPLACE INTO weather_hash_key(id, fingerprint, recorded_at) SELECT 1, ?1, ?2 WHERE NOT EXISTS (SELECT 1 FROM anonymous_weather_sessions)"
            case .always: "INSERT OR REPLACE INTO weather_hash_key(id, fingerprint, recorded_at) VALUES (1, ?1, ?2)"
            }
        return try write {
            try db.run(sql, [.text(fingerprint), .int(now.seconds)])
            return try db.scalarText("SELECT fingerprint FROM weather_hash_key WHERE id = 1") ?? fingerprint
        }
    }

    public var databaseFileIsGone: Bool { !db.isStillAtItsPath }

    /// The shared rate table, mapped now if this connection's page had no room for it when it was
    /// opened (a full disk since given room). Buckets counted in `weather_rate_limits` meanwhile
    /// are not carried over: they start full in the table, as at a first start.
    public func retrySharedRateBuckets() -> Bool { db.regainRateTable() }

    public func isHealthy() -> Bool {
        guard !sawDamage, !db.damageNoted, (try? reopenIfFaulted()) != nil, !databaseFileIsGone else { return false }
        guard let pending = try? Migrator.pending(in: db) else { return false }
        return pending.isEmpty
    }

    // MARK: Plumbing

    /// A `BEGIN IMMEDIATE` transaction whose failures become `StoreError`.
    @discardableResult
    private func write<T>(_ body: () throws -> T) throws(StoreError) -> T {
        try reopenIfFaulted()
        defer { sharedTakesInWrite.removeAll(keepingCapacity: true) }
        do { return try db.transaction(body) } catch {
            for t in sharedTakesInWrite {
                giveBackShared(zip(t.buckets, t.units).map { (bucket: $0, units: $1) }.filter(\.bucket.quota.isEnabled), nowMs: t.nowMs)
            }
            throw noteFault(error)
        }
    }

    /// Reads need no explicit transaction: each statement sees one WAL snapshot.
    private func read<T>(_ body: () throws -> T) throws(StoreError) -> T {
        try reopenIfFaulted()
        do { return try body() } catch { throw noteFault(error) }
    }

    private func noteFault(_ error: any Error) -> StoreError {
        let e = Self.storeError(error)
        lastFailure = e
        let primary = e.code & 0xff
        if primary == 8 || primary == 10 || primary == 14 { needsReopen = true }  // READONLY, IOERR, CANTOPEN
        if primary == 11 || primary == 26 {  // CORRUPT, NOTADB
            sawDamage = true
            db.noteDamage()
        }
        return e
    }

    private func reopenIfFaulted() throws(StoreError) {
        guard needsReopen, let path else { return }
        waitOfClosedConnections += db.takeWriteWait()
        db.close()
        Self.mendSidecarModes(path)
        do {
            // Not created: a file deleted meanwhile stays an error (health 503, `database=gone`),
            // where a new empty file without the schema would have been served.
            db = try Database(path: path, walWrites: .perCommit, gatewayFile: true, create: false)
            db.queueWritersAndDeferCheckpoints()
            // Opened read-only (disk still read-only): try again on the next call.
            needsReopen = db.isReadOnly
        } catch {
            let e = Self.storeError(error)
            lastFailure = e
            throw e
        }
    }

    static func storeError(_ error: any Error) -> StoreError {
        if let e = error as? DatabaseError { return e.storeError }
        if let e = error as? StoreError { return e }
        return StoreError(code: -1, message: "\(error)")
    }
}
