import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// The WAL stays bounded when another worker keeps reading: a passive checkpoint copies it back
/// but cannot start it over, so past the limit the worker's checkpoint empties it.
@Suite struct CheckpointTests {
    let now = Timestamp(seconds: 1_796_000_000)

    func walBytes(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path + "-wal"))?[.size] as? NSNumber)?.intValue ?? 0
    }

    @Test func aWALGrownWhileAnotherWorkerReadsIsEmptiedPastTheLimit() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ckpt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("w.sqlite3").path
        let writer = try SQLiteGatewayStore(path: path)
        let reader = try SQLiteGatewayStore(path: path)
        writer.db.queueWritersAndDeferCheckpoints()
        writer.db.walLimitPages = 2_000

        var n = 0
        func createSessions(_ count: Int) throws {
            for _ in 0..<count {
                n += 1
                let pair = IssuedPair(accessRowId: "wst_a\(n)", accessHash: "access-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-\(n)",
                                      lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
                try writer.createSession(NewSession(id: "aws_\(n)", installationIdHash: "inst-\(n)", platform: "ios", appVersion: nil, createdAt: now),
                                         tokens: pair)
            }
        }
        // The other worker is reading whenever this one could start the WAL over.
        for _ in 0..<12 {
            try reader.db.execute("BEGIN")
            _ = try reader.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions")
            try createSessions(40)
            writer.afterResponse()
            try reader.db.execute("COMMIT")
        }
        #expect(walBytes(path) > 2_000 * 4096, "the WAL grew past the limit: \(walBytes(path)) bytes")
        // The reader is done for the moment: the next due checkpoint empties the WAL.
        try createSessions(120)
        writer.afterResponse()
        #expect(walBytes(path) == 0)
        #expect(try reader.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == Int64(n))
        #expect(try reader.db.scalarText("PRAGMA integrity_check") == "ok")
    }
}
