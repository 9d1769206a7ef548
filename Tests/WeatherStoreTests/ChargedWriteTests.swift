import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// A creation or a rotation takes its quota in its own write transaction: one turn in the
/// writers' queue instead of two (a hot-path audit, session 32).
@Suite struct ChargedWriteTests {
    let now = Timestamp(seconds: 1_796_000_000)

    func pair(_ n: Int) -> IssuedPair {
        IssuedPair(
            accessRowId: "wst_a\(n)", accessHash: "access-hash-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-hash-\(n)",
            lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
    }

    func session(_ n: Int) -> NewSession {
        NewSession(id: "aws_000000000000000000000\(n)", installationIdHash: "inst", platform: "ios", appVersion: nil, createdAt: now)
    }

    func store() throws -> SQLiteGatewayStore {
        try SQLiteGatewayStore(path: try scratchDirectory("cw-charge").appendingPathComponent("w.sqlite3").path)
    }

    func charge(_ bucket: LimitBucket) -> LimitCharge { LimitCharge(buckets: [bucket], extra: [0], nowMs: now.seconds * 1000) }

    func tat(_ store: SQLiteGatewayStore, _ bucket: LimitBucket) throws -> Int64? {
        try store.rateState(bucket.key, nowMs: now.seconds * 1000)
    }

    /// The quota is taken with the rows: two creations pass, the third is refused and stores
    /// nothing; a creation that fails to store (its id taken) leaves its bucket untouched, as the
    /// rolled-back transaction held both.
    @Test func aCreationTakesItsQuotaWithItsRowsAndARefusalStoresNothing() throws {
        let s = try store()
        let bucket = LimitBucket(key: "create_ip:203.0.113.9", quota: Quota(limit: 2, window: 3600))
        #expect(try s.createSession(session(1), tokens: pair(1), charging: charge(bucket)) == .granted([1]))
        #expect(try s.createSession(session(2), tokens: pair(2), charging: charge(bucket)) == .granted([1]))
        let refused = try s.createSession(session(3), tokens: pair(3), charging: charge(bucket))
        guard case .refused(let retryAfter, let key) = refused else {
            Issue.record("not refused: \(refused)")
            return
        }
        #expect(key == bucket.key && retryAfter > 0)
        #expect(try s.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 2)
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_session_tokens") == 4)

        let other = LimitBucket(key: "create_ip:203.0.113.10", quota: Quota(limit: 2, window: 3600))
        #expect(try s.take([other], extra: [0], nowMs: now.seconds * 1000) == .granted([1]))
        let spent = try tat(s, other)
        #expect(spent == now.seconds * 1000 + 1_800_000)
        #expect(throws: StoreError.self) { try s.createSession(session(1), tokens: pair(4), charging: charge(other)) }
        #expect(try tat(s, other) == spent, "charged for a creation that stored nothing")
        #expect(try s.createSession(session(4), tokens: pair(4), charging: nil) == .granted([]))
    }

    /// A rotation is charged only when it rotates, in its own transaction; the same request again
    /// in the retry window and an unknown token cost nothing; a bucket emptied since the handler
    /// found room leaves the rotation standing, uncharged (never refused after the fact).
    @Test func aRotationIsChargedOnlyWhenItRotatesAndNeverRefusedAfterTheFact() throws {
        let s = try store()
        try s.createSession(session(1), tokens: pair(0))
        let id = session(1).id
        let bucket = LimitBucket(key: "refresh_session:\(id)", quota: Quota(limit: 1, window: 3600))
        #expect(
            try s.rotate(refreshTokenHash: "refresh-hash-0", sessionId: id, successor: pair(1), retryWindow: 30, now: now, charging: charge(bucket)) == .rotated
        )
        let charged = try tat(s, bucket)
        #expect(charged != nil)
        #expect(
            try s.rotate(refreshTokenHash: "refresh-hash-0", sessionId: id, successor: pair(1), retryWindow: 30, now: now, charging: charge(bucket))
                == .retried(pair(1).lifetimes))
        #expect(try s.rotate(refreshTokenHash: "unknown", sessionId: id, successor: pair(2), retryWindow: 30, now: now, charging: charge(bucket)) == .invalid)
        #expect(try tat(s, bucket) == charged)
        // The bucket (1 an hour) is full now: the next rotation stands, and is not charged.
        #expect(
            try s.rotate(refreshTokenHash: "refresh-hash-1", sessionId: id, successor: pair(2), retryWindow: 30, now: now, charging: charge(bucket)) == .rotated
        )
        #expect(try tat(s, bucket) == charged)
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_session_tokens WHERE token_type = 'refresh' AND revoked_at IS NULL") == 1)
    }
}
