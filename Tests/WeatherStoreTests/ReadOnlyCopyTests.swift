import Foundation
import Testing
import CSQLite
@testable import WeatherStore

/// The parts of opening a copy `immutable` that a test running as root can reach (root may
/// create a `-shm` anywhere, so SQLite never refuses it: `WeatherctlTests` runs that as nobody).
@Suite struct ReadOnlyCopyTests {
    @Test(arguments: [
        ("/var/lib/cw/weather.sqlite3", "file:///var/lib/cw/weather.sqlite3?immutable=1"),
        ("//net/share/w.sqlite3", "file:////net/share/w.sqlite3?immutable=1"),
        ("data/w #1?%.sqlite3", "file:data/w %231%3f%25.sqlite3?immutable=1"),
    ])
    func theURIEscapesWhatURIsReserve(path: String, uri: String) {
        #expect(Database.immutableURI(path) == uri)
    }

    /// Each URI opens the file at its path, whatever characters the path holds.
    @Test func theURIOpensTheFileItNames() throws {
        let dir = try scratchDirectory("cw-uri").appendingPathComponent("odd #1?% dir")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("w?#%.sqlite3").path
        let writer = try Database(path: path)
        try writer.execute("CREATE TABLE t(x); INSERT INTO t VALUES (42); PRAGMA wal_checkpoint(TRUNCATE)")
        writer.close()
        var db: OpaquePointer?
        #expect(sqlite3_open_v2(Database.immutableURI(path), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nil) == SQLITE_OK)
        var statement: OpaquePointer?
        #expect(sqlite3_prepare_v2(db, "SELECT x FROM t", -1, &statement, nil) == SQLITE_OK)
        #expect(sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_int(statement, 0) == 42)
        sqlite3_finalize(statement)
        sqlite3_close_v2(db)
    }

    /// A copy read `immutable` is reported changed once a worker writes it or opens it (a `-wal`
    /// or `-shm` appears), so `weatherctl` does not present what it read as the truth.
    @Test func aCopyReadImmutableIsReportedChangedWhenAWorkerOpensIt() throws {
        let dir = try scratchDirectory("cw-imm")
        let path = dir.appendingPathComponent("weather.sqlite3").path
        let first = try Database(path: path)
        try first.execute("CREATE TABLE t(x)")
        first.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))

        // What `init` keeps of a copy it opens immutable (as root, SQLite would make the copy's
        // -shm rather than refuse, so the check is called with the snapshot directly).
        let snapshot = try #require(Database.FileSnapshot(path))
        #expect(!Database.changed(since: snapshot))
        #expect(!Database.changed(since: snapshot), "reading the file again changes nothing")
        let worker = try Database(path: path)
        #expect(Database.changed(since: snapshot), "a -wal and -shm appeared")
        try worker.execute("INSERT INTO t VALUES (1)")
        worker.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(Database.changed(since: snapshot), "the file itself changed")
        #expect(!(try Database(path: path, readOnly: true)).changedWhileReadImmutable, "a connection not opened immutable")
    }
}
