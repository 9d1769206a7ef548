import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// Pruning walks sessions and tokens in rowid ranges (no expiry index): every range is visited,
/// the last partial one included, and only what the policy dooms goes.
@Suite struct PruneTests {
    let now = Timestamp(seconds: 1_796_000_000)

    /// Nine sessions, created in turn 70 days ago (abandoned: every token long expired), 2 days
    /// ago (the access token expired past the grace day, the refresh token live) and now.
    func store() throws -> SQLiteGatewayStore {
        let dir = try scratchDirectory("cw-prune")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        for i in 0..<9 {
            try store.createTestSession(i, createdAt: now.adding(seconds: [-70 * 86_400, -2 * 86_400, 0][i % 3]))
        }
        return store
    }

    /// The database file `store` has open.
    func file(of store: SQLiteGatewayStore) throws -> String {
        try #require(try store.db.statement("PRAGMA database_list").rows([]) { $0.text(2) ?? "" }.first)
    }

    func ids(_ store: SQLiteGatewayStore, _ sql: String) throws -> [String] {
        try store.db.statement(sql).rows([]) { $0.text(0) ?? "" }
    }

    /// A failing prune names SQLite's error, not the statement: weatherctl prints the message and
    /// under the prune timer it reaches the journal (API.md: no SQL in any log line).
    @Test func aFailedPruneSaysWhyWithoutTheStatement() throws {
        let dir = try scratchDirectory("cw-prune")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        let created = now.adding(seconds: -70 * 86_400)
        try store.createSession(
            NewSession(id: "aws_0", installationIdHash: "inst-0", platform: "ios", appVersion: nil, createdAt: created),
            tokens: IssuedPair(
                accessRowId: "wst_a0", accessHash: "access-0", refreshRowId: "wst_r0", refreshHash: "refresh-0",
                lifetimes: TokenLifetimes(now: created, policy: TokenPolicy())))
        let readOnly = SQLiteGatewayStore(database: try Database(path: path, readOnly: true))
        do throws(StoreError) {
            _ = try readOnly.prune(now: now, policy: PrunePolicy(), dryRun: false)
            Issue.record("a read-only database was pruned")
        } catch {
            #expect(error.message.hasPrefix("SQLite error 8"), "\(error.message)")
            #expect(!error.message.contains("DELETE") && !error.message.contains("`"), "\(error.message)")
        }
        withExtendedLifetime(store) {}
    }

    @Test(arguments: [1, 2, 4, 5000])
    func rangesOfAnyWidthPruneExactlyTheDoomedRows(width: Int) throws {
        let store = try store()
        var policy = PrunePolicy()
        policy.batchSize = width
        policy.deleteChunk = width  // transactions of `width` rows (sessions: a quarter, at least one)

        let dry = try store.prune(now: now, policy: policy, dryRun: true)
        #expect(dry.rows("anonymous_weather_sessions") == 3)
        #expect(dry.rows("weather_session_tokens") == 9)
        #expect(try store.db.scalarInt("SELECT count(*) FROM weather_session_tokens") == 18)

        let run = try store.prune(now: now, policy: policy, dryRun: false)
        #expect(run.rows("anonymous_weather_sessions") == 3)
        #expect(run.rows("weather_session_tokens") == 9)
        #expect(try ids(store, "SELECT id FROM anonymous_weather_sessions ORDER BY id") == ["aws_1", "aws_2", "aws_4", "aws_5", "aws_7", "aws_8"])
        #expect(
            try ids(store, "SELECT id FROM weather_session_tokens ORDER BY id")
                == ["wst_a2", "wst_a5", "wst_a8", "wst_r1", "wst_r2", "wst_r4", "wst_r5", "wst_r7", "wst_r8"])

        // Nothing is left to prune, though the rowids now start past 1.
        let again = try store.prune(now: now, policy: policy, dryRun: false)
        #expect(again.rows("anonymous_weather_sessions") == 0)
        #expect(again.rows("weather_session_tokens") == 0)
    }

    /// A session whose tokens went a day after they expired is not "abandoned" for that: an
    /// active one stays until 30 days after its last token could have expired (last seen plus a
    /// refresh token's lifetime), a revoked one until 30 days after its revocation. Both went on
    /// the second run before (no token left, last seen more than 30 days ago).
    @Test func sessionsOutliveTheirPrunedTokensAsTheRulesSay() throws {
        let dir = try scratchDirectory("cw-prune")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let created = now.adding(seconds: -33 * 86_400)  // the refresh tokens expired 3 days ago
        for i in 0..<2 { try store.createTestSession(i, createdAt: created) }
        #expect(try store.revokeSession(id: "aws_1", now: now.adding(seconds: -86_400)))
        for _ in 0..<2 { _ = try store.prune(now: now, policy: PrunePolicy(), dryRun: false) }
        #expect(try ids(store, "SELECT id FROM anonymous_weather_sessions ORDER BY id") == ["aws_0", "aws_1"])
        #expect(try store.db.scalarInt("SELECT count(*) FROM weather_session_tokens") == 0)

        // 30 days after the last token could have expired, and after the revocation: gone.
        let later = try store.prune(now: now.adding(seconds: 31 * 86_400), policy: PrunePolicy(), dryRun: false)
        #expect(later.rows("anonymous_weather_sessions") == 2)
    }

    /// Rowids far apart (one at the very top of the range) cost no walk through the gap, and no
    /// overflow: ranges end at the `width`th row, not after `width` rowids.
    @Test func sparseRowidsArePrunedInAFewRanges() throws {
        let store = try store()
        try store.db.execute("UPDATE weather_session_tokens SET rowid = 9223372036854775807 WHERE id = 'wst_a0'")
        try store.db.execute("UPDATE anonymous_weather_sessions SET rowid = 9223372036854775806 WHERE id = 'aws_3'")
        var policy = PrunePolicy()
        policy.batchSize = 4
        let run = try store.prune(now: now, policy: policy, dryRun: false)
        #expect(run.rows("anonymous_weather_sessions") == 3)
        #expect(run.rows("weather_session_tokens") == 9)
    }

    /// The workers' own clean-up: due when none, theirs or `weatherctl prune`'s, started for
    /// the interval; one worker of two that find it due at once runs it; a clock set back more
    /// than an hour behind the last start makes it due rather than wait for the clock.
    @Test func theWorkersCleanUpWhenNoneRanForTheInterval() throws {
        let store = try store()
        let other = try SQLiteGatewayStore(path: try file(of: store))
        let day: Int64 = 90_000
        func started() throws -> Int64? { try store.db.scalarInt("SELECT started_at FROM weather_maintenance WHERE task = 'prune'") }

        let first = try #require(try store.pruneIfDue(now: now, interval: day, policy: PrunePolicy()))
        #expect(first.rows("anonymous_weather_sessions") == 3 && first.rows("weather_session_tokens") == 9)
        #expect(try started() == now.seconds)
        #expect(try other.pruneIfDue(now: now, interval: day, policy: PrunePolicy()) == nil, "the other worker found it done")
        #expect(try store.pruneIfDue(now: now.adding(seconds: day - 1), interval: day, policy: PrunePolicy()) == nil)

        // `weatherctl prune` counts as a clean-up; its dry run does not.
        _ = try store.prune(now: now.adding(seconds: day - 10), policy: PrunePolicy(), dryRun: true)
        #expect(try started() == now.seconds)
        _ = try store.prune(now: now.adding(seconds: day - 10), policy: PrunePolicy(), dryRun: false)
        #expect(try started() == now.seconds + day - 10)
        #expect(try other.pruneIfDue(now: now.adding(seconds: day), interval: day, policy: PrunePolicy()) == nil)
        #expect(try other.pruneIfDue(now: now.adding(seconds: 2 * day - 10), interval: day, policy: PrunePolicy()) != nil)

        // Recorded under a clock two hours ahead of today's: due now, not in two hours.
        try store.db.execute("UPDATE weather_maintenance SET started_at = \(now.seconds + 2 * day + 7200)")
        #expect(try store.pruneIfDue(now: now.adding(seconds: 2 * day), interval: day, policy: PrunePolicy()) != nil)
        #expect(try started() == now.seconds + 2 * day)
        withExtendedLifetime(other) {}
    }

    /// Of two workers that both read "due" before either claimed it, one runs the clean-up: the
    /// claim is one conditional write.
    @Test func twoWorkersThatFindItDueAtOnceRunItOnce() throws {
        let store = try store()
        let other = try SQLiteGatewayStore(path: try file(of: store))
        try store.db.execute("INSERT INTO weather_maintenance(task, started_at) VALUES ('prune', \(now.seconds - 100_000))")
        // Both have read the old start; the second one's claim finds the first one's.
        let claimed = try [store, other].map { s throws -> Bool in
            try s.db.run(SQLiteGatewayStore.recordPrune, [.int(now.seconds), .int(now.seconds - 90_000), .int(now.seconds + 3600)]) == 1
        }
        #expect(claimed == [true, false])
        #expect(try other.pruneIfDue(now: now, interval: 90_000, policy: PrunePolicy()) == nil)
    }

    /// A worker's clean-up walks the session tables for a limited time: cut short, it says so,
    /// records no run (due again at once), and the next run goes on where the deletions stopped.
    @Test func aWalkCutShortIsDueAgainAndTheNextRunGoesOn() throws {
        let store = try store()
        try store.db.execute("INSERT INTO weather_counters(hour, name, value) VALUES ('2020-01-01T00', 'requests', 1)")
        var policy = PrunePolicy()
        policy.batchSize = 2
        policy.walkTimeLimitMs = 0  // out of time after the first range
        let first = try #require(try store.pruneIfDue(now: now, interval: 90_000, policy: policy))
        #expect(!first.complete)
        #expect(first.rows("anonymous_weather_sessions") == 1 && first.rows("weather_session_tokens") == 2, "one range of two sessions: aws_0")
        #expect(first.rows("weather_counters") == 1, "the small tables are pruned all the same")
        #expect(try store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 8)
        let second = try #require(try store.pruneIfDue(now: now, interval: 90_000, policy: policy), "due again at once")
        #expect(!second.complete && second.rows("anonymous_weather_sessions") == 0, "its first range holds aws_1 and aws_2: nothing to delete")

        policy.walkTimeLimitMs = 60_000
        let last = try #require(try store.pruneIfDue(now: now, interval: 90_000, policy: policy))
        #expect(last.complete)
        #expect(last.rows("anonymous_weather_sessions") == 2 && last.rows("weather_session_tokens") == 7)
        #expect(try store.pruneIfDue(now: now, interval: 90_000, policy: policy) == nil, "recorded")
    }

    /// The walk's time limit counts deleting, not reading: a walk over 50,000 sessions with
    /// nothing to delete is never cut short, however long the reading takes (a limit on the whole
    /// walk never got past a table slower to read than it, a review in session 19).
    @Test func aWalkThatDeletesNothingIsNeverCutShort() throws {
        let dir = try scratchDirectory("cw-prune")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let seen = SQLValue.text(now.iso8601)
        try store.db.transaction {
            try store.db.run(
                """
                WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000)
                INSERT INTO anonymous_weather_sessions(id, installation_id_hash, platform, app_version, status, created_at, last_seen_at, revoked_at)
                SELECT 'aws_kept' || i, 'inst' || i, 'ios', NULL, 'active', ?1, ?1, NULL FROM n
                """, [seen])
        }
        var policy = PrunePolicy()
        policy.batchSize = 500  // 100 ranges to read
        policy.walkTimeLimitMs = 1
        let started = MonotonicTime.now()
        let report = try store.prune(now: now, policy: policy, dryRun: false)
        let tookMs = (MonotonicTime.now() - started) / 1_000_000
        #expect(report.complete, "cut short after \(tookMs) ms of reading")
        #expect(report.rows("anonymous_weather_sessions") == 0)
        #expect(tookMs >= 1, "the walk read for \(tookMs) ms: too quick to show that reading does not count")
    }

    /// A pruned row is gone from the files, not only from the tables: the database overwrites it
    /// and the WAL, which held earlier images of its page, is emptied (a retention audit found
    /// deleted client addresses in the WAL).
    @Test func aPrunedRowLeavesNoCopyInTheFiles() throws {
        let dir = try scratchDirectory("cw-prune")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        let address = "weather_ip:203.0.113.77"
        try store.db.execute("INSERT INTO weather_rate_limits(bucket_key, tat_ms) VALUES ('\(address)', 1)")
        func copies() throws -> Int {
            try ["", "-wal"].reduce(0) { n, suffix in
                let bytes = (try? Data(contentsOf: URL(fileURLWithPath: path + suffix))) ?? Data()
                return n + (bytes.range(of: Data(address.utf8)) == nil ? 0 : 1)
            }
        }
        #expect(try copies() > 0, "written where the test looks")
        try store.db.execute("PRAGMA secure_delete = OFF")  // SQLite's default (Debian's build turns it on)
        let run = try store.prune(now: now, policy: PrunePolicy(), dryRun: false)
        #expect(run.rows("weather_rate_limits") == 1)
        #expect(try copies() == 0)
    }

    @Test func anEmptyDatabasePrunesNothing() throws {
        let dir = try scratchDirectory("cw-prune")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let run = try store.prune(now: now, policy: PrunePolicy(), dryRun: false)
        #expect(run.tables.allSatisfy { $0.rows == 0 })
    }
}
