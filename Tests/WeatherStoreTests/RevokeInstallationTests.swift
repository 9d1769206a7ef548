import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// `revokeInstallation` revokes an installation's sessions a batch per transaction, so a
/// running service waits for one batch at a time, not for all of them.
@Suite struct RevokeInstallationTests {
    let now = Timestamp(seconds: 1_796_000_000)

    /// Five active sessions of one installation (created a second apart) and one of another.
    func store() throws -> (SQLiteGatewayStore, path: String) {
        let dir = try scratchDirectory("cw-revoke")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        for i in 0..<6 {
            try store.createTestSession(i, createdAt: now.adding(seconds: Int64(i - 10)), installation: i == 5 ? "other" : "inst")
        }
        return (store, path)
    }

    func count(_ store: SQLiteGatewayStore, _ sql: String) throws -> Int64 {
        try store.db.scalarInt(sql) ?? -1
    }

    @Test(arguments: [1, 2, 5, 1_000])
    func everyBatchIsItsOwnCommitAndTogetherTheyRevokeAll(batchSize: Int) throws {
        let (store, path) = try store()
        // Another connection, as a worker's: it sees each batch as soon as it commits.
        let observer = try SQLiteGatewayStore(path: path)
        var seen: [Int64] = []
        let ids = try store.revokeInstallation(hash: "inst", now: now, batchSize: batchSize) { revokedSoFar in
            seen.append(try count(observer, "SELECT count(*) FROM anonymous_weather_sessions WHERE status = 'revoked'"))
            #expect(seen.last == Int64(revokedSoFar))
        }
        #expect(ids == ["aws_0", "aws_1", "aws_2", "aws_3", "aws_4"])
        #expect(seen.count == (5 + batchSize - 1) / batchSize)
        #expect(try count(store, "SELECT count(*) FROM anonymous_weather_sessions WHERE status = 'revoked' AND revoked_at IS NOT NULL") == 5)
        #expect(try count(store, "SELECT count(*) FROM weather_session_tokens WHERE revoked_at IS NOT NULL") == 10)
        #expect(try count(store, "SELECT count(*) FROM anonymous_weather_sessions WHERE id = 'aws_5' AND status = 'active'") == 1)
        #expect(try count(store, "SELECT count(*) FROM weather_session_tokens WHERE session_id = 'aws_5' AND revoked_at IS NULL") == 2)

        // Nothing is left to revoke; the other installation's session is untouched.
        #expect(try store.revokeInstallation(hash: "inst", now: now, batchSize: batchSize).isEmpty)
    }

    /// The installation's sessions are read once, before the first batch (no index serves the
    /// hash since migration 0008: a scan, kept out of the writers' lock): a session it creates
    /// while the command runs is not revoked, and one revoked by someone else meanwhile is not
    /// counted as this command's; a batch all of whose sessions were revoked meanwhile does not
    /// end the run.
    @Test func theSessionsAreThoseFoundWhenTheCommandRan() throws {
        let (store, _) = try store()
        var batches: [Int] = []
        let ids = try store.revokeInstallation(hash: "inst", now: now, batchSize: 2) { revokedSoFar in
            batches.append(revokedSoFar)
            guard batches.count == 1 else { return }
            try store.createTestSession(9, createdAt: now, installation: "inst")
            try store.db.run("UPDATE anonymous_weather_sessions SET status = 'revoked', revoked_at = ?1 WHERE id IN ('aws_2', 'aws_3')", [.text(now.iso8601)])
        }
        #expect(ids == ["aws_0", "aws_1", "aws_4"])
        #expect(batches == [2, 3], "the second batch found nothing left to revoke, the third went on")
        #expect(try count(store, "SELECT count(*) FROM anonymous_weather_sessions WHERE id = 'aws_9' AND status = 'active'") == 1)
        #expect(try count(store, "SELECT count(*) FROM weather_session_tokens WHERE session_id = 'aws_9' AND revoked_at IS NULL") == 2)
        #expect(try store.revokeInstallation(hash: "inst", now: now) == ["aws_9"])
    }

    /// Workers hear of each batch (the revocation generation moves per commit), not only at the end.
    @Test func workersAreToldAfterEachBatch() throws {
        let (store, _) = try store()
        let before = try #require(store.db.revocationGeneration)
        var generations: [UInt64] = []
        _ = try store.revokeInstallation(hash: "inst", now: now, batchSize: 2) { _ in
            generations.append(store.db.revocationGeneration ?? 0)
        }
        #expect(generations == [before + 1, before + 2, before + 3])
    }

    /// An error after a batch keeps what was committed; a second call revokes the rest.
    @Test func anInterruptedRevocationKeepsItsBatchesAndCompletesOnTheNextCall() throws {
        let (store, _) = try store()
        struct Stop: Error {}
        #expect(throws: StoreError.self) {
            _ = try store.revokeInstallation(hash: "inst", now: now, batchSize: 2) { _ in throw Stop() }
        }
        #expect(try count(store, "SELECT count(*) FROM anonymous_weather_sessions WHERE status = 'revoked'") == 2)
        #expect(try store.revokeInstallation(hash: "inst", now: now) == ["aws_2", "aws_3", "aws_4"])
    }

    /// A revocation noted inside a transaction is announced at its commit, not before (a worker
    /// that looked the grant up again meanwhile would have found it live) and not when it rolls
    /// back; outside one, at once.
    @Test func aRevocationIsAnnouncedAtItsCommitOnly() throws {
        let (store, _) = try store()
        let db = store.db
        let before = try #require(db.revocationGeneration)
        struct Stop: Error {}
        try db.transaction {
            db.noteRevocation()
            #expect(db.revocationGeneration == before, "not before the commit")
        }
        #expect(db.revocationGeneration == before + 1)
        #expect(throws: Stop.self) {
            try db.transaction {
                db.noteRevocation()
                throw Stop()
            }
        }
        try db.transaction {}
        #expect(db.revocationGeneration == before + 1, "rolled back: none, and none carried into the next commit")
        db.noteRevocation()
        #expect(db.revocationGeneration == before + 2)
    }

    /// A connection that could not open the `-writer` page when it started (a full disk, no file
    /// descriptor left) opens it when it revokes: its revocation reaches the other workers.
    @Test func aConnectionWithoutThePageOpensItToAnnounce() throws {
        let (store, path) = try store()
        let before = try #require(store.db.revocationGeneration)
        let late = try Database(path: path)  // no page, as after a failed opening
        #expect(late.revocationGeneration == nil)
        try late.transaction { late.noteRevocation() }
        #expect(store.db.revocationGeneration == before + 1, "announced through the page")
    }
}
