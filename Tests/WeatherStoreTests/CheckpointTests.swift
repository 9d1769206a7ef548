import Foundation
import Synchronization
import Testing
import WeatherCore
@testable import WeatherStore

/// The WAL stays bounded while another worker keeps reading: a passive checkpoint copies it back
/// but cannot start it over, so past the limit the worker's checkpoint makes it start over.
@Suite struct CheckpointTests {
    let now = Timestamp(seconds: 1_796_000_000)

    final class Reader: @unchecked Sendable {
        let store: SQLiteGatewayStore
        let stop = Atomic<Bool>(false)
        let reads = Atomic<Int>(0)
        init(_ store: SQLiteGatewayStore) { self.store = store }

        /// Short read transactions back to back, as a busy worker's; `reads` counts those that
        /// held a snapshot (a failed one holds none, and would leave the checkpoints free).
        func run() {
            while !stop.load(ordering: .relaxed) {
                do {
                    try store.db.execute("BEGIN")
                    _ = try store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions")
                    try store.db.execute("COMMIT")
                    reads.add(1, ordering: .relaxed)
                } catch {
                    try? store.db.execute("ROLLBACK")
                }
            }
        }
    }

    func walBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    @Test func theWALStartsOverPastTheLimitWhileAnotherWorkerKeepsReading() throws {
        let dir = try scratchDirectory("cw-ckpt")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let writer = try SQLiteGatewayStore(path: path)
        writer.db.queueWritersAndDeferCheckpoints()
        writer.db.walLimitPages = 2_000
        writer.db.checkpointPages = 1_000
        let reader = Reader(try SQLiteGatewayStore(path: path))
        let thread = Thread { reader.run() }
        thread.start()
        defer { reader.stop.store(true, ordering: .relaxed) }
        for _ in 0..<50_000 where reader.reads.load(ordering: .relaxed) == 0 { usleep(100) }
        try #require(reader.reads.load(ordering: .relaxed) > 0, "the other worker never read")
        let readsBefore = reader.reads.load(ordering: .relaxed)

        // 3,000 sessions: about 10 frames each, 15 times the limit if the WAL never started over.
        for n in 1...3_000 {
            try writer.createTestSession(n, createdAt: now)
            writer.afterResponse()
            writer.db.waitForCheckpoints()
        }
        reader.stop.store(true, ordering: .relaxed)
        let readsDuring = reader.reads.load(ordering: .relaxed) - readsBefore
        #expect(readsDuring >= 100, "the other worker read \(readsDuring) times while 3,000 sessions were written")
        // The limit (2,000 frames) and what was written before the next due checkpoint: 8.3 MB
        // here; left to grow, 16.6–24.9 MB in the same test.
        #expect(walBytes(path) < 3_000 * 4_120, "the WAL is \(walBytes(path)) bytes")
        #expect(try writer.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 3_000)
        #expect(try writer.db.scalarText("PRAGMA integrity_check") == "ok")
    }

    /// The worker only asks for a checkpoint: the checkpointer's thread and connection copy the
    /// WAL back. Closing the worker's connection ends that thread and closes its connection.
    @Test func theCheckpointRunsOnTheCheckpointersThread() throws {
        let dir = try scratchDirectory("cw-ckpt")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        store.db.checkpointPages = 100
        #expect(store.db.checkpointer == nil, "no thread before the first checkpoint")
        /// Sessions in the database file alone, without its WAL (a copy of the file, opened anew).
        func sessionsInTheFile() throws -> Int64? {
            let copy = dir.appendingPathComponent("copy-\(UUID().uuidString.prefix(8)).sqlite3").path
            try FileManager.default.copyItem(atPath: path, toPath: copy)
            return try Database(path: copy).scalarInt("SELECT count(*) FROM anonymous_weather_sessions")
        }
        var n = 0
        while store.db.walPages < 100 {
            n += 1
            try store.createTestSession(n, createdAt: now)
        }
        #expect(try sessionsInTheFile() == 0, "the sessions are in the WAL only")
        store.afterResponse()
        store.finishHousekeeping()  // what a stopping worker or a CGI process does last
        let checkpointer = try #require(store.db.checkpointer)
        #expect(checkpointer.runsMade == 1)
        #expect(try sessionsInTheFile() == Int64(n), "the checkpoint copied the sessions into the database file")
        store.db.close()
        #expect(store.db.checkpointer == nil)
        // Everything committed is there, read through a new connection.
        #expect(try Database(path: path).scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == Int64(n))
    }
    /// A checkpointer that cannot open the database (the file moved away under the worker) creates
    /// no new file at the path, the checkpoint runs inline, and the thread starts at the next due
    /// checkpoint once the file is back: a failed start made every later checkpoint inline, and
    /// its open created an empty database where the file had been.
    @Test func aCheckpointerThatCannotStartCreatesNoFileAndIsTriedAgain() throws {
        let dir = try scratchDirectory("cw-ckpt-retry")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        store.db.checkpointPages = 50
        var n = 0
        func writeUntilDue() throws {
            let start = store.db.walPages
            while store.db.walPages < start + 50 {
                n += 1
                try store.createTestSession(n, createdAt: now)
            }
        }
        try writeUntilDue()
        try FileManager.default.moveItem(atPath: path, toPath: path + ".away")
        store.afterResponse()
        #expect(store.db.checkpointer == nil)
        #expect(store.db.checkpoints == 1, "the checkpoint ran inline")
        #expect(!FileManager.default.fileExists(atPath: path), "the checkpointer created a database at the path")

        try FileManager.default.moveItem(atPath: path + ".away", toPath: path)
        try writeUntilDue()
        store.afterResponse()
        store.finishHousekeeping()
        let checkpointer = try #require(store.db.checkpointer, "not tried again")
        #expect(checkpointer.runsMade == 1)
        #expect(try store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == Int64(n))
    }

    /// The WAL's truncation at the end of a prune waits for a reader briefly, not SQLite's whole
    /// busy wait, since every writer waits behind it: a reader holding an old snapshot (a
    /// `.backup`) kept the workers' writes waiting 8.5 s (session 19, a review). It gives up,
    /// and empties the WAL once the reader is gone.
    @Test func truncatingTheWALGivesWayToAReaderAtOnce() throws {
        let dir = try scratchDirectory("cw-truncate")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        try store.createTestSession(1, createdAt: now)
        let reader = try Database(path: path)
        try reader.execute("BEGIN")
        #expect(try reader.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 1)  // holds its snapshot
        try store.createTestSession(2, createdAt: now)

        let started = MonotonicTime.now()
        #expect(!store.db.truncateWAL(), "the reader still needs the WAL")
        let waitedMs = (MonotonicTime.now() - started) / 1_000_000
        // 200 yields and 200 naps of 100 µs: 20–40 ms on a quiet machine, but each yield may cost
        // a time slice on a loaded one (1 s was passed there), so the bound is what tells it from
        // the whole busy wait (6–8 s by the clock).
        #expect(waitedMs < 3_000, "waited \(waitedMs) ms for the reader (the busy wait is 6–8 s)")

        try reader.execute("COMMIT")
        #expect(store.db.truncateWAL())
        let wal = try FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int
        #expect(wal == 0)
    }
    /// A worker's clean stop leaves every session in the database file itself, even while
    /// another worker still has it open: copied alone after a stop, the file lost the newest
    /// sessions, which were in the `-wal` only (a disaster-recovery drill, session 20).
    @Test func aCleanStopLeavesEverySessionInTheDatabaseFile() throws {
        let dir = try scratchDirectory("cw-stop")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let stopping = try SQLiteGatewayStore(path: path)
        let other = try SQLiteGatewayStore(path: path)  // another worker, still serving
        for n in 1...20 { try (n % 2 == 0 ? stopping : other).createTestSession(n, createdAt: now) }
        #expect(stopping.db.walPages > 0, "the sessions are in the WAL")

        stopping.closeForStop()
        let copy = dir.appendingPathComponent("copy.sqlite3").path
        try FileManager.default.copyItem(atPath: path, toPath: copy)  // the file alone, no -wal
        #expect(try Database(path: copy).scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 20)
        #expect(try other.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 20, "the other worker reads on")
    }
    /// A database found damaged makes the store unhealthy from then on: a disaster-recovery drill
    /// found `/v1/health` answering 200 on a file with a garbled page while every write got 503.
    @Test func aDamagedDatabaseIsUnhealthyOnceAWriteMeetsTheDamage() throws {
        let dir = try scratchDirectory("cw-damage")
        let path = dir.appendingPathComponent("w.sqlite3").path
        do {
            let store = try SQLiteGatewayStore(path: path)
            for n in 1...200 { try store.createTestSession(n, createdAt: now) }
            store.closeForStop()
        }
        // The second half of the file (the sessions' and tokens' pages, written last) overwritten
        // with noise; the schema and the migrations' record, written first, stay readable.
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        let from = size / 2 / 4096 * 4096
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(from))
        try handle.write(contentsOf: Data((0..<(size - from)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }))
        try handle.close()

        let store = try SQLiteGatewayStore(path: path)
        let other = try SQLiteGatewayStore(path: path)  // another worker, which never meets it
        #expect(other.isHealthy())
        #expect(throws: StoreError.self) { try store.createTestSession(999, createdAt: now) }
        #expect(store.lastFailure.map { $0.code & 0xff == 11 || $0.code & 0xff == 26 } == true, "\(String(describing: store.lastFailure))")
        #expect(!store.isHealthy())
        #expect(!other.isHealthy(), "told through the -writer page")
        #expect(try SQLiteGatewayStore(path: path).isHealthy() == false, "and a worker started later")
        // Cleared for a file found sound (`weatherctl check`) or made anew (`migrate`): then the
        // other worker is healthy; the one that met the damage keeps its own 503 until it restarts.
        #expect(other.clearDamageMark() && !other.clearDamageMark())
        #expect(other.isHealthy() && !store.isHealthy())
        store.db.noteDamage()

        // A sound file put in its place (the damaged one kept aside): healthy again, although
        // the -writer page (which a restore removes) still holds the mark.
        let sound = dir.appendingPathComponent("sound.sqlite3").path
        do {
            let fresh = try SQLiteGatewayStore(path: sound)
            fresh.closeForStop()
        }
        try FileManager.default.moveItem(atPath: path, toPath: path + ".damaged")
        try FileManager.default.moveItem(atPath: sound, toPath: path)
        #expect(try SQLiteGatewayStore(path: path).isHealthy())
    }
}
