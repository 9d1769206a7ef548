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

        /// Short read transactions back to back, as a busy worker's.
        func run() {
            while !stop.load(ordering: .relaxed) {
                try? store.db.execute("BEGIN")
                _ = try? store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions")
                try? store.db.execute("COMMIT")
                reads.add(1, ordering: .relaxed)
            }
        }
    }

    func walBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    @Test func theWALStartsOverPastTheLimitWhileAnotherWorkerKeepsReading() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ckpt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("w.sqlite3").path
        let writer = try SQLiteGatewayStore(path: path)
        writer.db.queueWritersAndDeferCheckpoints()
        writer.db.walLimitPages = 2_000
        writer.db.checkpointPages = 1_000
        let reader = Reader(try SQLiteGatewayStore(path: path))
        let thread = Thread { reader.run() }
        thread.start()
        defer { reader.stop.store(true, ordering: .relaxed) }
        while reader.reads.load(ordering: .relaxed) == 0 { usleep(100) }

        // 3,000 sessions: about 10 frames each, 15 times the limit if the WAL never started over.
        for n in 1...3_000 {
            let pair = IssuedPair(accessRowId: "wst_a\(n)", accessHash: "access-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-\(n)",
                                  lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
            try writer.createSession(NewSession(id: "aws_\(n)", installationIdHash: "inst-\(n)", platform: "ios", appVersion: nil, createdAt: now),
                                     tokens: pair)
            writer.afterResponse()
        }
        reader.stop.store(true, ordering: .relaxed)
        // The limit (2,000 frames) and what was written before the next due checkpoint: 8.3 MB
        // here; left to grow, 16.6–24.9 MB in the same test.
        #expect(walBytes(path) < 3_000 * 4_120, "the WAL is \(walBytes(path)) bytes")
        #expect(try writer.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 3_000)
        #expect(try writer.db.scalarText("PRAGMA integrity_check") == "ok")
    }

    /// After a passive checkpoint the database file is flushed on the flusher's thread, and
    /// closing the connection ends that thread.
    @Test func aPassiveCheckpointIsFlushedOffTheWorkersThread() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-flush-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        store.db.checkpointPages = 100
        let flusher = try #require(store.db.flusher)
        let before = flusher.flushesMade
        var n = 0
        while store.db.walPages < 100 {
            n += 1
            let pair = IssuedPair(accessRowId: "wst_a\(n)", accessHash: "access-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-\(n)",
                                  lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
            try store.createSession(NewSession(id: "aws_\(n)", installationIdHash: "inst-\(n)", platform: "ios", appVersion: nil, createdAt: now),
                                    tokens: pair)
        }
        #expect(flusher.flushesMade == before, "no flush before the checkpoint")
        store.afterResponse()
        // The flush runs on its own thread: wait for it (a few milliseconds; 5 s at most).
        var waited = 0
        while flusher.flushesMade == before && waited < 5_000 {
            usleep(1_000)
            waited += 1
        }
        #expect(flusher.flushesMade > before)
        store.db.close()
        #expect(store.db.flusher == nil)
    }
}
