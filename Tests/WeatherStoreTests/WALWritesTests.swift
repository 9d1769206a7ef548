import Foundation
import Testing
@testable import WeatherStore

/// `Database.WALWrites.perCommit`: a commit's frames reach the WAL in one write, before any other
/// connection can see the commit, and rollbacks between other connections' commits leave the
/// database sound.
@Suite struct WALWritesTests {
    func freshPath() throws -> String {
        let dir = try scratchDirectory("cw-walw")
        return dir.appendingPathComponent("w.sqlite3").path
    }

    @Test func eachCommitIsOneWriteAndVisibleToOthersAtOnce() throws {
        let path = try freshPath()
        let writer = try Database(path: path, walWrites: .perCommit)
        let reader = try Database(path: path)
        try writer.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT UNIQUE, v BLOB)")
        try writer.execute("CREATE INDEX t_v ON t(v)")
        #expect(reader.walWritesMade == nil, "SQLite's own VFS")
        for i in 1...50 {
            let before = try #require(writer.walWritesMade)
            _ = try writer.transaction {
                try writer.run("INSERT INTO t(k, v) VALUES (?1, ?2)", [.text("key-\(i)"), .blob([UInt8](repeating: UInt8(i), count: 3000))])
            }
            // Table, unique index and blob index: several frames, written with one call.
            #expect(try #require(writer.walWritesMade) - before == 1, "commit \(i)")
            // The other connection (SQLite's own VFS) reads the commit from the file right away.
            #expect(try reader.scalarInt("SELECT count(*) FROM t") == Int64(i))
        }
        #expect(try reader.scalarText("PRAGMA integrity_check") == "ok")
    }

    @Test func workerStoresUseItAndOtherConnectionsDoNot() throws {
        let path = try freshPath()
        let store = try SQLiteGatewayStore(path: path)  // a worker's: its migrations wrote the WAL
        #expect(store.db.walWritesMade != nil)
        #expect(try store.db.scalarInt("PRAGMA cache_spill") == 0, "no frames may wait for a commit that never comes")
        let other = try Database(path: path)  // weatherctl's, the checkpointer's
        _ = try other.scalarInt("SELECT count(*) FROM anonymous_weather_sessions")
        #expect(other.walWritesMade == nil)
    }

    @Test func rollbacksLargerThanTheCacheBetweenOtherCommitsLeaveTheDatabaseSound() throws {
        let path = try freshPath()
        let writer = try Database(path: path, walWrites: .perCommit)
        let other = try Database(path: path)
        try writer.execute("PRAGMA cache_size=-256")  // a transaction larger than the cache
        try writer.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB)")
        try writer.execute("CREATE INDEX t_v ON t(v)")
        for round in 0..<3 {
            try writer.execute("BEGIN IMMEDIATE")
            for i in 0..<400 { try writer.run("INSERT INTO t(v) VALUES (?1)", [.blob([UInt8](repeating: UInt8(i % 251), count: 2000 + i))]) }
            try writer.execute("ROLLBACK")
            // Another connection commits where the rolled-back frames would have gone.
            try other.transaction { for i in 0..<20 { try other.run("INSERT INTO t(v) VALUES (?1)", [.blob([UInt8](repeating: 7, count: 1500 + i))]) } }
            _ = try writer.transaction { try writer.run("INSERT INTO t(v) VALUES (?1)", [.blob([1, 2, 3])]) }
            #expect(try other.scalarInt("SELECT count(*) FROM t") == Int64(21 * (round + 1)))
        }
        #expect(try other.scalarText("PRAGMA integrity_check") == "ok")
        writer.close()
        other.close()
        let fresh = try Database(path: path)  // recovery from the WAL alone
        #expect(try fresh.scalarText("PRAGMA integrity_check") == "ok")
        #expect(try fresh.scalarInt("SELECT count(*) FROM t") == 63)
    }
}
