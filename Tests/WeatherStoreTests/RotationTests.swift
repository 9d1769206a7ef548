import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// Rotation when another worker acts between this worker's lookup (made before the write lock)
/// and its write transaction: the conditional update sees it, and the full check decides.
@Suite struct RotationTests {
    let now = Timestamp(seconds: 1_796_000_000)
    let session = "aws_0000000000000000000001"

    func pair(_ n: Int) -> IssuedPair {
        IssuedPair(
            accessRowId: "wst_a\(n)", accessHash: "access-hash-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-hash-\(n)",
            lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
    }

    /// Two workers' stores on one new database, the session created with pair 0.
    func twoWorkers() throws -> (SQLiteGatewayStore, SQLiteGatewayStore) {
        let dir = try scratchDirectory("cw-rotate")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let a = try SQLiteGatewayStore(path: path)
        let b = try SQLiteGatewayStore(path: path)
        try a.createSession(NewSession(id: session, installationIdHash: "inst", platform: "ios", appVersion: nil, createdAt: now), tokens: pair(0))
        return (a, b)
    }

    func liveRefreshTokens(_ store: SQLiteGatewayStore) throws -> Int64? {
        try store.db.scalarInt("SELECT count(*) FROM weather_session_tokens WHERE token_type = 'refresh' AND revoked_at IS NULL")
    }

    @Test func theSameRequestSpentMeanwhileIsARetry() throws {
        let (a, b) = try twoWorkers()
        var other: RotationOutcome?
        b.betweenRotationReadAndWrite = {
            other = try? a.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now)
        }
        let outcome = try b.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now)
        #expect(other == .rotated)
        #expect(outcome == .retried(pair(1).lifetimes))
        #expect(try liveRefreshTokens(a) == 1)
    }

    @Test func aRevocationMeanwhileMakesTheTokenInvalid() throws {
        let (a, b) = try twoWorkers()
        b.betweenRotationReadAndWrite = { _ = try? a.revokeSession(id: session, now: now) }
        let outcome = try b.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now)
        #expect(outcome == .invalid)
        #expect(try liveRefreshTokens(a) == 0)
    }

    @Test func anUnspentTokenRotatesOnceAndItsReuseRevokesTheSession() throws {
        let (a, b) = try twoWorkers()
        #expect(try b.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now) == .rotated)
        let later = now.adding(seconds: 31)
        #expect(try a.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: later) == .reused)
        #expect(try a.db.scalarText("SELECT status FROM anonymous_weather_sessions") == "revoked")
        #expect(try b.rotate(refreshTokenHash: "unknown", sessionId: session, successor: pair(2), retryWindow: 30, now: now) == .invalid)
    }

    /// A token already spent when it is presented is answered from a read when it is the same
    /// request again: no quota is charged for it since session 17, so its repeats must not queue
    /// for the write lock. A replay still takes it, to revoke the session.
    @Test func aRetryOfASpentTokenTakesNoWriteLock() throws {
        let (a, b) = try twoWorkers()
        #expect(try a.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now) == .rotated)
        var writes = 0
        b.betweenRotationReadAndWrite = { writes += 1 }
        let spent = try #require(try b.presentedRefreshToken(hash: "refresh-hash-0", sessionId: session, now: now))
        #expect(spent.spent)
        for _ in 0..<3 {
            #expect(try b.rotate(spent, successor: pair(1), retryWindow: 30, now: now.adding(seconds: 5)) == .retried(pair(1).lifetimes))
        }
        #expect(writes == 0, "a retry queued for the write lock")
        #expect(try b.rotate(spent, successor: pair(1), retryWindow: 30, now: now.adding(seconds: 31)) == .reused)
        #expect(writes == 1)
        #expect(try a.db.scalarText("SELECT status FROM anonymous_weather_sessions") == "revoked")
    }

    /// A token rotated under a clock since set back (an hour or ten days ahead) is a replay when
    /// presented again, not a retry for as long as the clock reads earlier; a minute's step is
    /// still a retry.
    @Test func aRotationAheadOfTheClockIsNoRetry() throws {
        for (step, outcome) in [(Int64(30), RotationOutcome.retried(pair(1).lifetimes)), (3600, .reused), (10 * 86_400, .reused)] {
            let (a, _) = try twoWorkers()
            let rotatedAt = now.adding(seconds: step)
            #expect(try a.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: rotatedAt) == .rotated)
            let again = try a.rotate(refreshTokenHash: "refresh-hash-0", sessionId: session, successor: pair(1), retryWindow: 30, now: now)
            if case .retried = outcome { #expect(again.isRetry, "a \(step) s step") } else { #expect(again == outcome, "a \(step) s step") }
        }
    }
}

extension RotationOutcome {
    var isRetry: Bool { if case .retried = self { true } else { false } }
}
