import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// The operator queries behind `weatherctl`, on the same connection type the workers use. Reads are
/// single statements (one WAL snapshot each); writes are short `BEGIN IMMEDIATE` transactions.
extension SQLiteGatewayStore: OperatorStore {
    // MARK: Sessions

    public func sessions(_ filter: SessionFilter) throws(StoreError) -> [SessionSummary] {
        let columns =
            "id, platform, app_version, status, created_at, last_seen_at, revoked_at, substr(installation_id_hash, 1, \(SessionSummary.hashPrefixLength))"
        let status: SQLValue = filter.status.map { .text($0.rawValue) } ?? .null
        return try operate {
            if let hash = filter.installationIdHash {
                // A scan of the table (no index on the hash since migration 0008; an operator's
                // look-up, a read that holds no writer up).
                let s = try db.statement(
                    """
                    SELECT \(columns) FROM anonymous_weather_sessions
                    WHERE installation_id_hash = ?2 AND (?1 IS NULL OR status = ?1)
                    ORDER BY created_at DESC, id DESC LIMIT ?3
                    """)
                return try s.rows([status, .text(hash), .int(Int64(filter.limit))], Self.summary)
            }
            let s = try db.statement(
                """
                SELECT \(columns) FROM anonymous_weather_sessions
                WHERE ?1 IS NULL OR status = ?1
                ORDER BY created_at DESC, id DESC LIMIT ?2
                """)
            return try s.rows([status, .int(Int64(filter.limit))], Self.summary)
        }
    }

    public func session(id: String, now: Timestamp) throws(StoreError) -> SessionDetail? {
        try operate { () throws -> SessionDetail? in
            let s = try db.statement(
                """
                SELECT id, platform, app_version, status, created_at, last_seen_at, revoked_at,
                       substr(installation_id_hash, 1, \(SessionSummary.hashPrefixLength)),
                       (SELECT count(*) FROM anonymous_weather_sessions o WHERE o.installation_id_hash = s.installation_id_hash)
                FROM anonymous_weather_sessions s WHERE id = ?1
                """)
            guard let (summary, siblings) = try s.rows([.text(id)], { (try Self.summary($0), Int($0.int(8))) }).first else {
                return nil
            }
            // Revoked first (rotation retires refresh tokens this way), then expired, else live.
            let counts = try db.statement(
                """
                SELECT token_type,
                       sum(revoked_at IS NULL AND expires_at > ?2),
                       sum(revoked_at IS NULL AND expires_at <= ?2),
                       sum(revoked_at IS NOT NULL)
                FROM weather_session_tokens WHERE session_id = ?1 GROUP BY token_type
                """)
            var byType: [TokenKind: TokenCounts] = [:]
            for row in try counts.rows(
                [.text(id), .text(now.iso8601)],
                { r in
                    (r.text(0).flatMap(TokenKind.init(rawValue:)), Int(r.int(1)), Int(r.int(2)), Int(r.int(3)))
                })
            {
                guard let kind = row.0 else { continue }
                byType[kind] = TokenCounts(type: kind, live: row.1, expired: row.2, revoked: row.3)
            }
            let tokens = [TokenKind.access, .refresh].map { byType[$0] ?? TokenCounts(type: $0) }
            return SessionDetail(summary: summary, tokens: tokens, sessionsOfInstallation: siblings)
        }
    }

    public var revocationsReachWorkers: Bool { db.revocationGeneration != nil }

    public var isReadOnlySnapshot: Bool { db.isImmutableCopy }

    public func announceRevocations() { db.noteRevocation() }

    /// Sessions revoked per transaction by `revokeInstallation`: a few milliseconds of the
    /// writers' lock each. An installation with 200,000 sessions held every write of the service
    /// for about a second in one transaction.
    public static let revocationBatch = 1_000

    public func revokeInstallation(hash: String, now: Timestamp) throws(StoreError) -> [String] {
        try revokeInstallation(hash: hash, now: now, batchSize: Self.revocationBatch)
    }

    /// `revokeInstallation` in batches of `batchSize` sessions; `afterBatch` (for tests) runs
    /// after each batch's commit with the number revoked so far.
    ///
    /// The installation's active sessions are found first, by one read outside any transaction:
    /// no index serves `installation_id_hash` (migration 0008 dropped it: it cost every creation a
    /// random page), so the read scans the table, 0.1–0.2 s a million sessions in memory,
    /// which inside a write transaction would hold every worker's writes. Each batch then revokes
    /// those of its sessions still active, found by their ids. A session the installation creates
    /// after that read is not revoked: the command revokes the sessions it found when it ran.
    func revokeInstallation(
        hash: String, now: Timestamp, batchSize: Int,
        afterBatch: (Int) throws -> Void = { _ in }
    ) throws(StoreError) -> [String] {
        precondition(batchSize > 0, "batch size must be positive")
        return try operate {
            let found = try db.statement(
                """
                SELECT id FROM anonymous_weather_sessions WHERE installation_id_hash = ?1 AND status = 'active'
                ORDER BY created_at, id
                """
            ).rows([.text(hash)]) { $0.text(0) ?? "" }
            // The batch's ids as one JSON array, so that each statement is one cached statement
            // whatever the batch's size.
            let chosen = "SELECT value FROM json_each(?1)"
            func jsonArray(_ ids: some Sequence<String>) -> SQLValue {
                var w = JSONWriter()
                w.array { w in for id in ids { w.element(id) } }
                return .text(String(decoding: w.bytes, as: UTF8.self))
            }
            var revoked: [String] = []
            var next = 0
            while next < found.count {
                let batch = found[next..<min(next + batchSize, found.count)]
                next = batch.endIndex
                let ids = try db.transaction { () throws -> [String] in
                    let list = jsonArray(batch)
                    let active = try db.statement(
                        "SELECT id FROM anonymous_weather_sessions WHERE id IN (\(chosen)) AND status = 'active' ORDER BY created_at, id"
                    ).rows([list]) { $0.text(0) ?? "" }
                    guard !active.isEmpty else { return [] }
                    let bindings: [SQLValue] = [jsonArray(active), .text(now.iso8601)]
                    try db.run("UPDATE weather_session_tokens SET revoked_at = ?2 WHERE revoked_at IS NULL AND session_id IN (\(chosen))", bindings)
                    try db.run(
                        "UPDATE anonymous_weather_sessions SET status = 'revoked', revoked_at = coalesce(revoked_at, ?2) WHERE id IN (\(chosen))",
                        bindings)
                    db.noteRevocation()  // announced at the commit
                    return active
                }
                revoked += ids
                if !ids.isEmpty { try afterBatch(revoked.count) }
                if next < found.count { Self.letWritersIn() }
            }
            return revoked
        }
    }

    // MARK: Counters

    public func counters(fromHour: String, toHour: String) throws(StoreError) -> [CounterRow] {
        try operate {
            try db.statement("SELECT hour, name, value FROM weather_counters WHERE hour >= ?1 AND hour <= ?2 ORDER BY hour, name")
                .rows([.text(fromHour), .text(toHour)]) { CounterRow(hour: $0.text(0) ?? "", name: $0.text(1) ?? "", value: $0.int(2)) }
        }
    }

    // MARK: Pruning

    /// A session with nothing left to live for: revoked long ago (?1; a revocation without a
    /// time counts from the last sighting), or not revoked but abandoned: last seen before ?5
    /// and no token of it expiring after ?2. Its tokens may be gone already (they go a day after
    /// they expire), so "abandoned" rests on `last_seen_at`: its last refresh token expired at
    /// most a refresh-token lifetime after it was last seen, which ?5 (?2 less that lifetime)
    /// allows for. A revoked session waits for its own rule.
    private static let doomedSession = """
        (status = 'revoked' AND coalesce(revoked_at, last_seen_at) < ?1)
        OR (status <> 'revoked' AND last_seen_at < ?5 AND NOT EXISTS (
              SELECT 1 FROM weather_session_tokens t
              WHERE t.session_id = anonymous_weather_sessions.id AND t.expires_at >= ?2))
        """

    public func prune(now: Timestamp, policy: PrunePolicy, dryRun: Bool) throws(StoreError) -> PruneReport {
        precondition(policy.batchSize > 0, "batch size must be positive")
        let bounds = PruneBounds(now: now, policy: policy)
        return try operate {
            var report = PruneReport(dryRun: dryRun)
            // What is deleted is overwritten in the file, whatever the build's default (Debian's
            // libsqlite3 does it; SQLite's own default does not): client addresses, cells, hashes.
            if !dryRun { try db.execute("PRAGMA secure_delete = ON") }
            // Sessions first, with their tokens (the foreign key wants tokens gone before the session).
            let (sessions, tokens): (Int, Int)
            if dryRun {
                (sessions, tokens) = try countDoomedSessionsAndTokens(bounds)
            } else {
                (sessions, tokens, report.complete) = try deleteDoomedSessionsAndTokens(bounds, policy: policy)
            }
            report.tables.append(("anonymous_weather_sessions", sessions))
            report.tables.append(("weather_session_tokens", tokens))
            report.tables += try pruneKeyedTables(bounds, batch: policy.batchSize, dryRun: dryRun)
            // The shared rate table's lapsed buckets too (not counted in the report: they are
            // slots of a file, not rows). A worker's clean-up connection has no table; the worker
            // forgets them on its own connection (`pruneIfDue`).
            if !dryRun { _ = db.rateTable?.forgetLapsed(nowMs: bounds.nowMs) }
            if !dryRun && report.complete {
                _ = try db.transaction { try db.run(Self.recordPrune, [.int(now.seconds), .int(.max), .int(.max)]) }
                // The WAL still holds earlier images of the pages, the deleted rows in them, until
                // they are written over (it is kept up to 64 MiB): a retention audit found 283 of
                // 300 deleted client addresses there. Emptied now, if no reader holds it (else at
                // the next run).
                db.truncateWAL()
            }
            return report
        }
    }

    /// The times a prune compares rows with, worked out once from its `now` and policy.
    struct PruneBounds {
        let now: Timestamp
        let nowMs: Int64
        let revokedBefore: SQLValue
        let abandonedBefore: SQLValue
        let lastSeenBefore: SQLValue
        let tokenExpiredBefore: SQLValue
        let counterHourBefore: SQLValue
        let cellsSeenBeforeMs: Int64

        init(now: Timestamp, policy: PrunePolicy) {
            self.now = now
            nowMs = now.seconds * 1000
            revokedBefore = .text(now.adding(seconds: -policy.revokedSessionRetention).iso8601)
            abandonedBefore = .text(now.adding(seconds: -policy.abandonedSessionRetention).iso8601)
            lastSeenBefore = .text(now.adding(seconds: -policy.abandonedSessionRetention - policy.refreshTokenLifetime).iso8601)
            tokenExpiredBefore = .text(now.adding(seconds: -policy.expiredTokenGrace).iso8601)
            counterHourBefore = .text(CounterKey.hour(of: now.adding(seconds: -policy.counterRetention)))
            cellsSeenBeforeMs = nowMs - policy.cellWindow * 1000
        }

        /// The bindings of `doomedSession` (?3 and ?4 are free for a statement's own).
        var doomed: [SQLValue] { [revokedBefore, abandonedBefore, tokenExpiredBefore, .null, lastSeenBefore] }
    }

    /// A dry run: the sessions a prune would delete, and their tokens with the expired ones.
    private func countDoomedSessionsAndTokens(_ b: PruneBounds) throws -> (sessions: Int, tokens: Int) {
        let sessions = try count("SELECT count(*) FROM anonymous_weather_sessions WHERE \(Self.doomedSession)", b.doomed)
        var tokens = try count(
            "SELECT count(*) FROM weather_session_tokens WHERE session_id IN (SELECT id FROM anonymous_weather_sessions WHERE \(Self.doomedSession))",
            b.doomed)
        tokens += try count(
            """
            SELECT count(*) FROM weather_session_tokens WHERE expires_at < ?3
            AND session_id NOT IN (SELECT id FROM anonymous_weather_sessions WHERE \(Self.doomedSession))
            """, b.doomed)
        return (sessions, tokens)
    }

    /// Deletes the doomed sessions with their tokens, then the tokens expired past the grace;
    /// `complete` is false when `policy.walkTimeLimitMs` stopped a walk.
    ///
    /// Both tables are walked in rowid ranges: no index but the rowid is needed. A range is read
    /// without the write lock, and what it dooms is deleted in transactions of `deleteChunk`
    /// rows, so a worker waits for one such transaction at most (docs/decisions.md, Storage). A
    /// doomed row stays doomed between the read and its deletion: a revoked session stays
    /// revoked, an abandoned one has no token a refresh could present, an expired token stays
    /// expired.
    private func deleteDoomedSessionsAndTokens(_ b: PruneBounds, policy: PrunePolicy) throws -> (sessions: Int, tokens: Int, complete: Bool) {
        // The limit counts time spent deleting, not reading: a run always reads both tables whole
        // (about 1.2 s a million sessions), so every run gets past the rows it kept, and a run
        // cut short leaves less to delete for the next (a review: with the limit on the whole
        // walk, a table that took longer than it to read was never walked to its end).
        let limitNs = policy.walkTimeLimitMs.map { UInt64(max($0, 0)) * 1_000_000 }
        var deletingNs: UInt64 = 0
        var cut = false  // a walk stopped at the limit
        let outOfTime = {
            cut = cut || limitNs.map { deletingNs >= $0 } ?? false
            return cut
        }
        func timed(_ body: () throws -> Void) rethrows {
            let started = MonotonicTime.now()
            defer { deletingNs += MonotonicTime.now() - started }
            try body()
        }

        var tokens = 0
        let sessionChunk = max(1, policy.deleteChunk / 4)  // a session and its tokens: ~4 rows
        let sessions = try inRowidRanges(of: "anonymous_weather_sessions", width: policy.batchSize, stoppingWhen: outOfTime) { after, upTo in
            let ids = try db.statement("SELECT id FROM anonymous_weather_sessions WHERE rowid > ?3 AND rowid <= ?4 AND (\(Self.doomedSession))")
                .rows([b.revokedBefore, b.abandonedBefore, .int(after), .int(upTo), b.lastSeenBefore]) { $0.text(0) ?? "" }
            try timed {
                try inChunks(ids, of: sessionChunk) { chunk in
                    for id in chunk {
                        tokens += try db.run("DELETE FROM weather_session_tokens WHERE session_id = ?1", [.text(id)])
                        try db.run("DELETE FROM anonymous_weather_sessions WHERE id = ?1", [.text(id)])
                    }
                }
            }
            return ids.count
        }
        // Expired past the grace period: never live, and past any reuse check.
        if !cut {
            tokens += try inRowidRanges(of: "weather_session_tokens", width: policy.batchSize, stoppingWhen: outOfTime) { after, upTo in
                let rowids = try db.statement("SELECT rowid FROM weather_session_tokens WHERE rowid > ?2 AND rowid <= ?3 AND expires_at < ?1")
                    .rows([b.tokenExpiredBefore, .int(after), .int(upTo)]) { $0.int(0) }
                var deleted = 0
                try timed {
                    try inChunks(rowids, of: policy.deleteChunk) { chunk in
                        // The expiry again: a rowid freed meanwhile may be a new token's.
                        for rowid in chunk {
                            deleted += try db.run(
                                "DELETE FROM weather_session_tokens WHERE rowid = ?1 AND expires_at < ?2", [.int(rowid), b.tokenExpiredBefore])
                        }
                    }
                }
                return deleted
            }
        }
        // A walk cut short: the next run starts it over (past what this one deleted, quickly).
        return (sessions, tokens, !cut)
    }

    /// The cache, fetch-lock, limit, cell and counter rows past their time, counted (`dryRun`)
    /// or deleted `batch` rows a statement. These WITHOUT ROWID tables batch on their primary keys.
    private func pruneKeyedTables(_ b: PruneBounds, batch: Int, dryRun: Bool) throws -> [(table: String, rows: Int)] {
        let keyed: [(table: String, key: String, condition: String, bound: SQLValue)] = [
            ("weather_cache", "cache_key", "stale_until <= ?1", .int(b.now.seconds)),
            ("weather_fetch_locks", "cache_key", "expires_at <= ?1", .int(b.now.seconds)),
            ("weather_rate_limits", "bucket_key", "tat_ms < ?1", .int(b.nowMs)),
            ("weather_session_cells", "(session_id, cell)", "first_seen_ms <= ?1", .int(b.cellsSeenBeforeMs)),
            ("weather_counters", "(hour, name)", "hour < ?1", b.counterHourBefore),
        ]
        return try keyed.map { k in
            if dryRun { return (k.table, try count("SELECT count(*) FROM \(k.table) WHERE \(k.condition)", [k.bound])) }
            let columns = k.key.hasPrefix("(") ? String(k.key.dropFirst().dropLast()) : k.key
            let rows = try deleteInBatches(
                "DELETE FROM \(k.table) WHERE \(k.key) IN (SELECT \(columns) FROM \(k.table) WHERE \(k.condition) LIMIT ?2)",
                [k.bound], batch: batch)
            return (k.table, rows)
        }
    }

    /// Records a clean-up's start where the last one started at or before ?2 or after ?3
    /// (`weatherctl prune`: always, ?2 the largest time).
    static let recordPrune = """
        INSERT INTO weather_maintenance(task, started_at) VALUES ('prune', ?1)
        ON CONFLICT(task) DO UPDATE SET started_at = excluded.started_at WHERE started_at <= ?2 OR started_at > ?3
        """

    /// Runs `body` once per range of at most `width` rows of `table` (by rowid), from its first
    /// row to its last (as it was when the walk began); `body` takes the write lock itself, if it
    /// needs it (`inChunks`). Returns the sum of what the calls return. Each range ends at the `width`th rowid after the
    /// last one (a search on the rowid), so sparse rowids cost no empty ranges; rows added
    /// meanwhile past the last rowid are left alone.
    /// `stoppingWhen` is asked after each range: true ends the walk there.
    private func inRowidRanges(
        of table: String, width: Int, stoppingWhen stop: () -> Bool = { false },
        _ body: (_ after: Int64, _ upTo: Int64) throws -> Int
    ) throws -> Int {
        guard let first = try db.scalarInt("SELECT min(rowid) FROM \(table)"),
            let last = try db.scalarInt("SELECT max(rowid) FROM \(table)")
        else { return 0 }
        let rangeEnd = try db.statement("SELECT rowid FROM \(table) WHERE rowid > ?1 ORDER BY rowid LIMIT 1 OFFSET ?2")
        var total = 0
        var after = first > .min ? first - 1 : .min  // (a row at rowid -2^63 itself is left alone)
        while after < last {
            let upTo = min(try rangeEnd.rows([.int(after), .int(Int64(width - 1))]) { $0.int(0) }.first ?? last, last)
            total += try body(after, upTo)
            after = upTo
            if after < last && stop() { break }
        }
        return total
    }

    /// Runs `body` on `items` in chunks of `size`, each chunk in its own transaction, with a
    /// pause for waiting writers after each.
    private func inChunks<T>(_ items: [T], of size: Int, _ body: (ArraySlice<T>) throws -> Void) throws {
        var start = 0
        while start < items.count {
            let end = min(start + size, items.count)
            try db.transaction { try body(items[start..<end]) }
            start = end
            Self.letWritersIn()
        }
    }

    /// Runs `sql` (whose last parameter is the batch size) in short transactions until a batch
    /// comes back smaller than full. Returns the rows deleted.
    private func deleteInBatches(_ sql: String, _ bindings: [SQLValue], batch: Int) throws -> Int {
        var total = 0
        while true {
            let n = try db.transaction { try db.run(sql, bindings + [.int(Int64(batch))]) }
            total += n
            if n < batch { return total }
            Self.letWritersIn()
        }
    }

    /// A pause between two of the maintenance job's transactions. The writers' queue is not
    /// first come, first served: without it, the job took the lock again at once, and a worker
    /// waiting for it got it only when its own wait timed out (5 s; `prune` of 800,000 revoked
    /// sessions held every write of the service for that long).
    private static func letWritersIn() { usleep(2_000) }

    private func count(_ sql: String, _ bindings: [SQLValue]) throws -> Int {
        Int(try db.scalarInt(sql, bindings) ?? 0)
    }

    public func lastCleanUp() throws(StoreError) -> Timestamp? {
        try operate {
            guard try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'weather_maintenance'") != nil else { return nil }
            return try db.scalarInt("SELECT started_at FROM weather_maintenance WHERE task = 'prune'").map(Timestamp.init(seconds:))
        }
    }

    // MARK: Health and migrations

    public func clearDamageMark() -> Bool { db.clearDamageMark() }

    public func integrityCheck() throws(StoreError) -> String {
        try operate {
            let lines = try db.statement("PRAGMA integrity_check(20)").rows { $0.text(0) ?? "" }
            return lines.joined(separator: "; ")
        }
    }

    public func rateBuckets(now: Timestamp) -> RateBuckets {
        guard let table = db.rateTable else {
            guard db.hasWriterPage else {
                return .notKnown(
                    why:
                        "this process could not open the -writer file beside the database, which holds the workers' table (it may only read it, or no worker has made it yet)"
                )
            }
            return .database(why: rateTableUnavailable ?? "")
        }
        let misses = table.lockMisses
        return .sharedTable(
            RateTableState(
                slots: SharedRateTable.slots, live: table.liveBuckets(nowMs: now.seconds * 1000), forgottenForRoom: table.evictions,
                lockMisses: misses, lastLockMiss: misses == 0 ? nil : Timestamp(seconds: table.lastLockMissMs / 1000)))
    }

    /// Why the rate buckets are counted in the database, not in the table the workers share; nil
    /// when they are in the table. Without `rateBuckets`' count of the table's 16,384 slots: a
    /// worker asks at every start, and under plain CGI every request is one.
    public var rateTableUnavailable: String? { db.rateTableUnavailable }

    public func journalMode() throws(StoreError) -> String {
        if let recorded = db.immutableFileJournalMode { return recorded }  // a copy opened immutable
        return try operate { (try db.scalarText("PRAGMA journal_mode") ?? "unknown").lowercased() }
    }

    /// Reads `d1_migrations` without creating it, so a check never writes.
    public func pendingMigrations() throws(StoreError) -> [String] {
        try operate {
            try Migrator.refuseAnotherProgramsFile(db)  // not "all pending": migrate would refuse it
            guard try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'd1_migrations'") != nil else {
                return embeddedMigrations.map(\.name).sorted()
            }
            let done = Set(try db.statement("SELECT name FROM d1_migrations").rows { $0.text(0) ?? "" })
            return embeddedMigrations.map(\.name).sorted().filter { !done.contains($0) }
        }
    }

    public func unknownMigrations() throws(StoreError) -> [String] {
        try operate {
            guard try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'd1_migrations'") != nil else { return [] }
            let known = Set(embeddedMigrations.map(\.name))
            return try db.statement("SELECT name FROM d1_migrations ORDER BY name").rows { $0.text(0) ?? "" }.filter { !known.contains($0) }
        }
    }

    public func applyMigrations() throws(StoreError) -> [String] {
        try operate { try Migrator.apply(to: db) }
    }

    // MARK: Plumbing

    private static func summary(_ r: Statement) throws -> SessionSummary {
        SessionSummary(
            id: r.text(0) ?? "", platform: r.text(1) ?? "", appVersion: r.isNull(2) ? nil : r.text(2),
            status: r.text(3) ?? "",
            createdAt: r.text(4).flatMap { Timestamp(iso8601: $0) },
            lastSeenAt: r.text(5).flatMap { Timestamp(iso8601: $0) },
            revokedAt: r.isNull(6) ? nil : r.text(6).flatMap { Timestamp(iso8601: $0) },
            installationHashPrefix: r.text(7) ?? "")
    }

    /// Runs `body`, turning any failure into a `StoreError`.
    private func operate<T>(_ body: () throws -> T) throws(StoreError) -> T {
        do { return try body() } catch { throw Self.storeError(error) }
    }
}
