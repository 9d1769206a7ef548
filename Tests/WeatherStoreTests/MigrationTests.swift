import CSQLite
import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

@Suite struct MigrationTests {
    func tempDB() throws -> Database {
        try Database(path: try scratchDirectory("cw-store").appendingPathComponent("w.sqlite3").path)
    }

    /// Connections opening a brand-new file at once (a first start racing `weatherctl migrate`)
    /// each switch it to WAL and migrate it; SQLite answered one of them SQLITE_BUSY to the
    /// switch without waiting (8 of 40 such starts failed). Here two at once, in forty rounds.
    @Test func twoConnectionsOpeningANewFileAtOnceBothSucceed() throws {
        let dir = try scratchDirectory("cw-first-open")
        final class Failures: @unchecked Sendable {
            private let lock = NSLock()
            private(set) var list: [String] = []
            func add(_ s: String) { lock.lock(); list.append(s); lock.unlock() }
        }
        let failures = Failures()
        for round in 0..<40 {
            let path = dir.appendingPathComponent("r\(round).sqlite3").path
            let group = DispatchGroup()
            for _ in 0..<2 {
                group.enter()
                Thread {
                    defer { group.leave() }
                    do {
                        let db = try Database(path: path)
                        defer { db.close() }
                        _ = try Migrator.apply(to: db)
                    } catch {
                        failures.add("round \(round): \(error)")
                    }
                }.start()
            }
            group.wait()
        }
        #expect(failures.list.isEmpty, "\(failures.list.prefix(3))")
    }

    @Test func embeddedMigrationsEqualTheFilesOnDisk() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let dir = root.appendingPathComponent("migrations")
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(files == embeddedMigrations.map(\.name), "run scripts/embed.sh")
        for m in embeddedMigrations {
            let text = try String(contentsOf: dir.appendingPathComponent(m.name), encoding: .utf8)
            #expect(text.trimmingCharacters(in: .newlines) == m.sql.trimmingCharacters(in: .newlines), "\(m.name) differs; run scripts/embed.sh")
        }
        #expect(files.allSatisfy { $0.range(of: #"^\d{4}_[a-z0-9_]+\.sql$"#, options: .regularExpression) != nil })
    }

    @Test func sharedTablesMatchTheContractColumnForColumn() throws {
        let db = try tempDB()
        try Migrator.apply(to: db)
        func columns(_ table: String) throws -> [String] {
            try db.statement("SELECT name || ' ' || type || ' ' || \"notnull\" || ' ' || pk FROM pragma_table_info('\(table)') ORDER BY cid").rows {
                $0.text(0)!
            }
        }
        #expect(
            try columns("anonymous_weather_sessions") == [
                "id TEXT 0 1", "installation_id_hash TEXT 1 0", "platform TEXT 1 0", "app_version TEXT 0 0",
                "status TEXT 1 0", "created_at TEXT 1 0", "last_seen_at TEXT 1 0", "revoked_at TEXT 0 0",
            ])
        #expect(
            try columns("weather_session_tokens") == [
                "id TEXT 0 1", "session_id TEXT 1 0", "token_hash TEXT 1 0", "token_type TEXT 1 0",
                "expires_at TEXT 1 0", "created_at TEXT 1 0", "revoked_at TEXT 0 0",
            ])
        #expect(try columns("d1_migrations") == ["id INTEGER 0 1", "name TEXT 0 0", "applied_at TIMESTAMP 1 0"])
    }

    /// The indexes a creation writes into: each is one more page in its commit, and one on a
    /// random key (a hash) is a page of its own for every row on a big database. Only the token
    /// hash's (the contract's UNIQUE) is random; the primary keys and the tokens' session index
    /// grow at their right-hand end (ids begin with their time). 0004 dropped two indexes only
    /// the clean-up used, 0008 the installation hash's, which only weatherctl read.
    @Test func aCreationWritesIntoTheseIndexesOnly() throws {
        let db = try tempDB()
        try Migrator.apply(to: db)
        let indexes = try db.statement(
            "SELECT tbl_name || ' ' || coalesce(group_concat(name, ','), '') FROM (SELECT tbl_name, name FROM sqlite_master WHERE type = 'index' AND tbl_name IN ('anonymous_weather_sessions', 'weather_session_tokens') ORDER BY tbl_name, name) GROUP BY tbl_name ORDER BY tbl_name"
        ).rows { $0.text(0)! }
        #expect(
            indexes == [
                "anonymous_weather_sessions sqlite_autoindex_anonymous_weather_sessions_1",
                "weather_session_tokens sqlite_autoindex_weather_session_tokens_1,sqlite_autoindex_weather_session_tokens_2,weather_session_tokens_session",
            ])
    }

    /// Another program's database is refused, not given this gateway's tables; a file holding
    /// the sessions table without the migrations' record (a D1 export) is migrated.
    @Test func anotherProgramsDatabaseIsRefused() throws {
        let foreign = try tempDB()
        try foreign.execute("CREATE TABLE moz_places(id INTEGER PRIMARY KEY, url TEXT)")
        #expect {
            try Migrator.apply(to: foreign)
        } throws: { error in
            "\(error)".contains("1 table(s) or view(s) and not this gateway's sessions table") && "\(error)".contains("WEATHER_DB_PATH")
        }
        #expect(try foreign.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table'") == 1, "nothing added")
        // Opening it to write refuses before anything changes: still its own journal mode, no
        // -writer page beside it (they were switched to WAL and given one before refusing).
        let path = try scratchDirectory("cw-store").appendingPathComponent("other.sqlite3").path
        do {
            let other = try Database(path: path)  // empty: opened as ours, then made another program's
            try other.execute("PRAGMA journal_mode=DELETE")
            try other.execute("CREATE TABLE moz_places(id INTEGER PRIMARY KEY, url TEXT)")
        }
        let writerBefore = FileManager.default.fileExists(atPath: path + "-writer")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(throws: (any Error).self) { _ = try SQLiteGatewayStore(path: path) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
        #expect(!writerBefore && !FileManager.default.fileExists(atPath: path + "-writer"))
        // Another D1 project's export has a migrations' record of its own: told by its names.
        let d1 = try tempDB()
        try d1.execute(
            """
            CREATE TABLE d1_migrations(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL);
            INSERT INTO d1_migrations(name) VALUES ('0001_users.sql');
            CREATE TABLE users(id TEXT, secret TEXT)
            """)
        #expect(throws: DatabaseError.self) { try Migrator.apply(to: d1) }
        // Or none (a project whose schema was made by hand), or only ours over another's tables.
        for names in ["", "INSERT INTO d1_migrations(name) VALUES ('0001_anonymous_weather_sessions.sql');"] {
            let other = try tempDB()
            try other.execute(
                """
                CREATE TABLE d1_migrations(id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT UNIQUE, applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL);
                \(names)
                CREATE TABLE users(id TEXT, secret TEXT)
                """)
            #expect(throws: DatabaseError.self) { try Migrator.apply(to: other) }
        }
        // Ours, stopped after its record was made but before 0001's tables: migrated.
        let started = try tempDB()
        try started.execute(Migrator.createTable)
        #expect(try Migrator.apply(to: started) == embeddedMigrations.map(\.name))
        // Litestream's own tables on a new file are not another program's.
        let replicated = try tempDB()
        try replicated.execute("CREATE TABLE _litestream_seq (id INTEGER PRIMARY KEY, seq INTEGER); CREATE TABLE _litestream_lock (id INTEGER)")
        #expect(try Migrator.apply(to: replicated) == embeddedMigrations.map(\.name))
        let view = try tempDB()
        try view.execute("CREATE VIEW v AS SELECT 1")
        #expect(throws: DatabaseError.self) { try Migrator.apply(to: view) }

        let export = try tempDB()
        try export.execute(embeddedMigrations[0].sql)
        #expect(try Migrator.apply(to: export) == embeddedMigrations.map(\.name))
        #expect(try Migrator.apply(to: tempDB()) == embeddedMigrations.map(\.name), "an empty file")
    }

    /// 0009 forgets the rate buckets keyed by a plain address (before session 35) and nothing else:
    /// a session's buckets, and every session and token, stay. The addresses are gone from the
    /// files too, on a build that does not overwrite what it deletes (here: the connection's
    /// `secure_delete` off; Debian's library has it on): the migrations turn it on and empty the
    /// WAL after (without either, the bytes were in the file or the WAL).
    @Test func theUpgradeForgetsBucketsKeyedByAPlainAddress() throws {
        let path = try scratchDirectory("cw-store").appendingPathComponent("w.sqlite3").path
        let db = try Database(path: path)
        try db.execute("PRAGMA secure_delete = OFF")
        let before = embeddedMigrations.filter { $0.name < "0009" }
        #expect(try Migrator.apply(before, to: db).count == 8)
        try db.execute(
            """
            INSERT INTO weather_rate_limits(bucket_key, tat_ms) VALUES ('create_ip:198.51.100.7', 1), ('weather_ip:2001:db8::/64', 2),
              ('legacy_ip:203.0.113.9', 3), ('weather_session:aws_1', 4), ('refresh_session:aws_1', 5);
            INSERT INTO anonymous_weather_sessions(id, installation_id_hash, platform, status, created_at, last_seen_at)
              VALUES ('aws_1', 'h', 'ios', 'active', '2026-12-04T00:00:00Z', '2026-12-04T00:00:00Z');
            """)
        #expect(try Migrator.apply(to: db) == ["0009_forget_address_keyed_rate_buckets.sql"])
        let left = try db.statement("SELECT bucket_key FROM weather_rate_limits ORDER BY bucket_key").rows { $0.text(0) ?? "" }
        #expect(left == ["refresh_session:aws_1", "weather_session:aws_1"])
        #expect(try db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 1)
        #expect(try db.scalarInt("PRAGMA secure_delete") == 0, "the connection's own setting again")
        for file in [path, path + "-wal"] {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))) ?? Data()
            for address in ["198.51.100.7", "2001:db8::/64", "203.0.113.9"] {
                #expect(bytes.range(of: Data(address.utf8)) == nil, "\(address) in \(file)")
            }
        }
    }

    @Test func applyingTwiceRecordsEachFileOnce() throws {
        let db = try tempDB()
        #expect(try Migrator.apply(to: db) == embeddedMigrations.map(\.name))
        #expect(try Migrator.apply(to: db) == [])
        #expect(try db.scalarInt("SELECT count(*) FROM d1_migrations") == Int64(embeddedMigrations.count))
        #expect(try Migrator.pending(in: db) == [])
        // Asked of a file with no record (health), it writes none.
        let empty = try tempDB()
        #expect(throws: (any Error).self) { try Migrator.pending(in: empty) }
        #expect(try empty.scalarInt("SELECT count(*) FROM sqlite_master") == 0)
    }

    /// Health is 503 while a migration is pending (a file restored from before an upgrade).
    @Test func aPendingMigrationMakesTheStoreUnhealthy() throws {
        let store = try SQLiteGatewayStore(path: try scratchDirectory("cw-store").appendingPathComponent("w.sqlite3").path)
        #expect(store.isHealthy())
        try store.db.execute("DELETE FROM d1_migrations WHERE name = '\(embeddedMigrations.last!.name)'")
        #expect(!store.isHealthy())
    }

    /// An up-to-date database is migrated by one read: no write lock at all, so it migrates while
    /// another connection holds that lock (here with no busy wait, so a write would fail at once).
    /// Each file used to take the write lock to find itself recorded, at every worker's start and
    /// on every request under plain CGI.
    @Test func anUpToDateDatabaseIsMigratedWithoutAWrite() throws {
        let path = try scratchDirectory("cw-store").appendingPathComponent("w.sqlite3").path
        let db = try Database(path: path)
        #expect(try Migrator.apply(to: db) == embeddedMigrations.map(\.name))
        let holder = try Database(path: path)
        try holder.execute("BEGIN IMMEDIATE")
        defer { try? holder.execute("ROLLBACK") }
        let other = try Database(path: path)
        sqlite3_busy_handler(other.handle, nil, nil)
        #expect(try Migrator.apply(to: other) == [])
        let partial = try scratchDirectory("cw-store").appendingPathComponent("p.sqlite3").path
        let fresh = try Database(path: partial)
        #expect(try Migrator.apply(Array(embeddedMigrations.prefix(3)), to: fresh) == embeddedMigrations.prefix(3).map(\.name))
        #expect(try Migrator.apply(to: fresh) == embeddedMigrations.dropFirst(3).map(\.name), "the rest, each once")
    }

    @Test func connectionUsesWALAndForeignKeys() throws {
        let db = try tempDB()
        #expect(try db.scalarText("PRAGMA journal_mode") == "wal")
        #expect(try db.scalarInt("PRAGMA synchronous") == 1)
        #expect(try db.scalarInt("PRAGMA foreign_keys") == 1)
    }

    @Test func failingTransactionRollsBack() throws {
        let db = try tempDB()
        try db.execute("CREATE TABLE t(x INTEGER)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try db.transaction {
                try db.run("INSERT INTO t VALUES (1)")
                throw Boom()
            }
        }
        #expect(try db.scalarInt("SELECT count(*) FROM t") == 0)
    }

    @Test func foreignKeyRefusesTokenOfUnknownSession() throws {
        let db = try tempDB()
        try Migrator.apply(to: db)
        #expect(throws: DatabaseError.self) {
            try db.run("INSERT INTO weather_session_tokens VALUES ('wst_1', 'aws_missing', 'h', 'access', 'x', 'y', NULL)")
        }
    }
}

@Suite struct LimitStoreTests {
    @Test func consumeIsAllOrNothing() throws {
        let dir = try scratchDirectory("cw-lim")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let a = LimitBucket(key: "a:1", quota: Quota(limit: 5, window: 3600))
        let b = LimitBucket(key: "b:1", quota: Quota(limit: 1, window: 3600))
        #expect(try store.consume([a, b], nowMs: 0) == .allowed)
        #expect(try store.consume([a, b], nowMs: 0) == .refused(retryAfter: 3600, bucket: "b:1"))
        // `a` was not charged for the refused request: 4 more fit.
        for _ in 0..<4 { #expect(try store.consume([a], nowMs: 0) == .allowed) }
        #expect(try store.consume([a], nowMs: 0) != .allowed)
    }

    /// Two requests for one new cell at once, on two workers: the second finds the cell counted
    /// by the first when it takes the lock and is admitted; it counted it as one cell more, and
    /// with the quota then full answered 429 for a day (found by a black-box race hunt: 6 of 40
    /// tries of 8 requests at once).
    @Test func aCellCountedByAnotherWorkerMeanwhileIsAdmitted() throws {
        let dir = try scratchDirectory("cw-cell-race")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let a = try SQLiteGatewayStore(path: path), b = try SQLiteGatewayStore(path: path)
        let q = Quota(limit: 3, window: 86_400)
        for cell in ["1,1", "1,2"] { #expect(try a.admitCell(cell, sessionId: "s", quota: q, nowMs: 0).verdict == .allowed) }
        var other: CellAdmission?
        b.betweenCellReadAndWrite = { other = try? a.admitCell("1,3", sessionId: "s", quota: q, nowMs: 1000) }
        #expect(try b.admitCell("1,3", sessionId: "s", quota: q, nowMs: 1000).verdict == .allowed)
        #expect(other?.verdict == .allowed)
        #expect(try a.db.scalarInt("SELECT count(*) FROM weather_session_cells WHERE session_id = 's'") == 3)
        b.betweenCellReadAndWrite = nil
        #expect(try b.admitCell("1,4", sessionId: "s", quota: q, nowMs: 2000).verdict != .allowed, "a fourth cell")
    }

    /// Cells first seen after now were counted under a clock since set back: they do not fill
    /// the quota (its wait came out longer than the window: 97,200 s of a 86,400 s window after a
    /// 3 h step), and one asked again is counted from now.
    @Test func cellsCountedUnderAClockSinceSetBackDoNotCount() throws {
        let dir = try scratchDirectory("cw-cell-back")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let q = Quota(limit: 2, window: 86_400)
        let ahead: Int64 = 10_800_000  // 3 h
        #expect(try store.admitCell("1,1", sessionId: "s", quota: q, nowMs: ahead).verdict == .allowed)
        #expect(try store.admitCell("1,2", sessionId: "s", quota: q, nowMs: ahead).verdict == .allowed)
        #expect(try store.admitCell("1,3", sessionId: "s", quota: q, nowMs: 0).verdict == .allowed, "the quota is not full at 0")
        #expect(try store.admitCell("1,1", sessionId: "s", quota: q, nowMs: 0).verdict == .allowed)
        #expect(try store.cellCountedUntil("1,1", sessionId: "s", quota: q, nowMs: 0) == 86_400_000, "counted from now")
        #expect(try store.admitCell("1,4", sessionId: "s", quota: q, nowMs: 0).verdict == .refused(retryAfter: 86_400, bucket: "cells:s"))
    }

    @Test func distinctCellsRollingWindow() throws {
        let dir = try scratchDirectory("cw-cell")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        let q = Quota(limit: 2, window: 86_400)
        #expect(try store.admitCell("1,1", sessionId: "s", quota: q, nowMs: 0).verdict == .allowed)
        #expect(try store.admitCell("1,2", sessionId: "s", quota: q, nowMs: 1_000_000).verdict == .allowed)
        #expect(try store.admitCell("1,1", sessionId: "s", quota: q, nowMs: 2_000_000).verdict == .allowed)
        #expect(try store.admitCell("1,3", sessionId: "s", quota: q, nowMs: 2_000_000).verdict == .refused(retryAfter: 84_400, bucket: "cells:s"))
        #expect(try store.admitCell("1,3", sessionId: "other", quota: q, nowMs: 2_000_000).verdict == .allowed)
        #expect(try store.admitCell("1,3", sessionId: "s", quota: q, nowMs: 86_400_001).verdict == .allowed)
    }
}

@Suite struct HealthTests {
    /// A database moved (or deleted) under a running worker is reported unhealthy: a worker
    /// started afterwards would create a new, empty one at the path and split the service.
    @Test func aDatabaseMovedAwayFromItsPathIsUnhealthy() throws {
        let dir = try scratchDirectory("cw-health")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        #expect(store.isHealthy())
        try FileManager.default.moveItem(atPath: path, toPath: path + ".moved")
        #expect(!store.isHealthy())
        let newcomer = try SQLiteGatewayStore(path: path)  // what a restarted worker would do
        #expect(newcomer.isHealthy())
        #expect(!store.isHealthy())
        try FileManager.default.removeItem(atPath: path)
        #expect(!newcomer.isHealthy())
    }
}
