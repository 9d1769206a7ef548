import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
import WeatherCrypto
import WeatherStore

@Suite struct SessionTests {
    @Test func creationReturnsSevenFieldsWithPrefixesAndLifetimes() throws {
        let t = try TestGateway()
        let a = t.send("POST", "/v1/weather/session", body: ["platform": "ios", "appVersion": "1.0", "installationId": "0B6F1C4E-6F5A-4C0E-9D2B-2C1E8F3A7D11"])
        #expect(a.status == 201)
        #expect(a.headers["cache-control"] == "no-store")
        #expect(a.headers["pragma"] == "no-cache")
        let j = a.json
        #expect(Set(j.keys) == ["anonymousSessionId", "weatherAccessToken", "refreshToken", "expiresAt", "refreshAfter", "expiresIn", "refreshTokenExpiresAt"])
        let access = try #require(j["weatherAccessToken"] as? String)
        let refresh = try #require(j["refreshToken"] as? String)
        #expect(TokenSyntax.isWellFormed(access, kind: .access))
        #expect(TokenSyntax.isWellFormed(refresh, kind: .refresh))
        #expect((j["anonymousSessionId"] as? String)?.hasPrefix("aws_") == true)
        #expect(j["expiresAt"] as? String == "2026-11-30T14:00:00Z")
        #expect(j["refreshAfter"] as? String == "2026-11-30T08:00:00Z")
        #expect(j["refreshTokenExpiresAt"] as? String == "2026-12-30T02:00:00Z")
        #expect(j["expiresIn"] as? Int == 43200)
    }

    @Test func storesOnlyHashes() throws {
        let t = try TestGateway()
        let s = t.createSession(installationId: "0B6F1C4E-6F5A-4C0E-9D2B-2C1E8F3A7D11")
        let access = s["weatherAccessToken"] as! String
        let hashes = try t.store.db.statement("SELECT token_hash FROM weather_session_tokens ORDER BY token_type").rows { $0.text(0)! }
        #expect(hashes == [SHA256.hex(access), SHA256.hex(s["refreshToken"] as! String)])
        let installation = try t.store.db.scalarText("SELECT installation_id_hash FROM anonymous_weather_sessions")
        #expect(installation == (HMACSHA256.hex("0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11", key: TestGateway.hashKey)))
    }

    @Test func refreshRotatesBothTokensAndRefusesTheOldOne() throws {
        let t = try TestGateway()
        let s = t.createSession()
        t.clock.advance(7 * 3600)
        let r = t.refresh(s)
        #expect(r.status == 200)
        #expect(r.headers["cache-control"] == "no-store")
        #expect(r.json["anonymousSessionId"] as? String == s["anonymousSessionId"] as? String)
        #expect(r.json["weatherAccessToken"] as? String != s["weatherAccessToken"] as? String)
        #expect(r.json["refreshToken"] as? String != s["refreshToken"] as? String)
        #expect(r.json["expiresAt"] as? String == "2026-11-30T21:00:00Z")
        // The old access token stays valid until its own expiry.
        #expect(t.weather(token: s["weatherAccessToken"] as? String).status == 200)
        #expect(t.weather(token: r.json["weatherAccessToken"] as? String).status == 200)
        t.clock.advance(31)
        #expect(t.refresh(s).errorCode == "refresh_token_reused")
    }

    @Test func identicalRetryInsideWindowGetsTheSamePair() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let first = t.refresh(s)
        t.clock.advance(20)
        let again = t.refresh(s)
        #expect(again.status == 200)
        #expect(again.json["weatherAccessToken"] as? String == first.json["weatherAccessToken"] as? String)
        #expect(again.json["refreshToken"] as? String == first.json["refreshToken"] as? String)
        #expect(again.json["expiresAt"] as? String == first.json["expiresAt"] as? String)
        #expect(again.json["expiresIn"] as? Int == 43200 - 20)
        let live = try t.store.db.scalarInt("SELECT count(*) FROM weather_session_tokens WHERE token_type = 'refresh' AND revoked_at IS NULL")
        #expect(live == 1)
    }

    @Test func refreshReplayAfterWindowRevokesWholeSession() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let next = t.refresh(s)
        t.clock.advance(31)
        let replay = t.refresh(s)
        #expect(replay.status == 401)
        #expect(replay.errorCode == "refresh_token_reused")
        #expect(t.weather(token: next.json["weatherAccessToken"] as? String).status == 401)
        #expect(t.weather(token: s["weatherAccessToken"] as? String).status == 401)
        #expect(t.refresh(next.json).errorCode == "invalid_refresh_token")
        #expect(try t.store.db.scalarText("SELECT status FROM anonymous_weather_sessions") == "revoked")
    }

    @Test func retryWindowZeroDisablesIdempotentRetry() throws {
        let t = try TestGateway { $0.tokenPolicy.refreshRetryWindow = 0 }
        let s = t.createSession()
        #expect(t.refresh(s).status == 200)
        // The very same second: with the window off, a replay is a replay however soon it comes.
        #expect(t.refresh(s).errorCode == "refresh_token_reused")
        #expect(try t.store.db.scalarText("SELECT status FROM anonymous_weather_sessions") == "revoked")
    }

    @Test func refreshRefusesUnknownExpiredForeignAndAccessTokens() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let other = t.createSession()
        #expect(t.refresh(s, token: "wtr_" + String(repeating: "A", count: 43)).errorCode == "invalid_refresh_token")
        #expect(t.refresh(s, token: other["refreshToken"] as? String).errorCode == "invalid_refresh_token")
        #expect(
            t.send("POST", "/v1/weather/session/refresh", body: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["weatherAccessToken"]!])
                .errorCode == "invalid_request")
        t.clock.advance(30 * 86400 + 1)
        #expect(t.refresh(s).errorCode == "invalid_refresh_token")
    }

    @Test func refreshMovesLastSeenWithTheNextBatch() throws {
        let t = try TestGateway()
        let s = t.createSession()
        t.clock.advance(100)
        #expect(t.refresh(s).status == 200)  // TestGateway flushes after every response
        #expect(try t.store.db.scalarText("SELECT last_seen_at FROM anonymous_weather_sessions") == "2026-11-30T02:01:40Z")
    }

    @Test func lastSeenTouchesGoInShortChunksUntilNoneAreLeft() throws {
        let t = try TestGateway {
            $0.flushInterval = 3600
            $0.limits.sessionCreatePerIPPerHour = 0
        }
        let ids = (0..<150).map { _ in t.createSession()["anonymousSessionId"] as! String }
        t.clock.advance(60)
        for id in ids.shuffled() { t.gateway.metrics.touched(id, at: t.clock.now()) }
        func touchedRows() throws -> Int64? {
            try t.store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions WHERE last_seen_at = '2026-11-30T02:01:00Z'")
        }
        t.clock.advance(3600)
        t.gateway.metrics.flushIfDue(to: t.store, now: t.clock.now())
        #expect(try touchedRows() == Int64(Metrics.touchesPerFlush), "one short transaction, not 150 updates at once")
        // In session-id order (ids start with their creation time: neighbours share pages).
        let first = try t.store.db.statement("SELECT id FROM anonymous_weather_sessions WHERE last_seen_at = '2026-11-30T02:01:00Z' ORDER BY id").rows([]) {
            $0.text(0) ?? ""
        }
        #expect(first == Array(ids.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.prefix(Metrics.touchesPerFlush)))
        // Noted meanwhile: waits for the next round, after the 86 still being written.
        t.gateway.metrics.touched(ids[0], at: t.clock.now())
        t.gateway.metrics.flushIfDue(to: t.store, now: t.clock.now())
        #expect(try touchedRows() == Int64(2 * Metrics.touchesPerFlush), "the rest follows the next responses, interval or not")
        t.gateway.metrics.flushIfDue(to: t.store, now: t.clock.now())
        #expect(try touchedRows() == 150)
        t.gateway.metrics.flushIfDue(to: t.store, now: t.clock.now())
        #expect(try t.store.db.scalarText("SELECT last_seen_at FROM anonymous_weather_sessions WHERE id = '\(ids[0])'") == "2026-11-30T03:01:00Z")
    }

    @Test func revokeStopsEveryTokenAtOnce() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let a = t.send("POST", "/v1/weather/session/revoke", body: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!])
        #expect(a.status == 204)
        #expect(a.body.isEmpty)
        #expect(t.weather(token: s["weatherAccessToken"] as? String).status == 401)
        #expect(t.refresh(s).errorCode == "invalid_refresh_token")
        let other = t.createSession()
        let wrong = t.send(
            "POST", "/v1/weather/session/revoke", body: ["anonymousSessionId": other["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!])
        #expect(wrong.errorCode == "invalid_refresh_token")
    }

    /// A wrong pair, and a revoke repeated, write nothing: they answer while another connection
    /// holds the write lock (a write would wait for it), and a repeat does not make every worker
    /// drop the grants it holds (the revocation generation moves once).
    @Test func aWrongPairOrARepeatedRevokeWritesNothing() throws {
        let t = try TestGateway { $0.flushInterval = 3600 }  // no counter flush while the lock is held
        let s = t.createSession(), other = t.createSession()
        let pair: [String: Any] = ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!]
        #expect(t.send("POST", "/v1/weather/session/revoke", body: pair).status == 204)
        let generation = try #require(t.store.db.revocationGeneration)

        let holder = try SQLiteGatewayStore(path: t.config.databasePath)
        try holder.db.run("BEGIN IMMEDIATE")
        let repeated = t.send("POST", "/v1/weather/session/revoke", body: pair)
        #expect(repeated.status == 204, "\(repeated.errorCode ?? "")")
        let wrong = t.send(
            "POST", "/v1/weather/session/revoke",
            body: ["anonymousSessionId": other["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!])
        #expect(wrong.errorCode == "invalid_refresh_token")
        try holder.db.run("ROLLBACK")
        #expect(t.store.db.revocationGeneration == generation)
        #expect(t.weather(token: other["weatherAccessToken"] as? String).status == 200, "the other session is untouched")
        // `stats` counts sessions the app revoked, not revoke answers: the repeat added one (a
        // black-box operator audit, session 17).
        t.gateway.afterResponse(force: true)
        #expect(try t.store.db.scalarInt("SELECT sum(value) FROM weather_counters WHERE name = 'sessions.revoked'") == 1)
    }

    @Test(arguments: [
        (#"{"appVersion":"1"}"#, "platform"),
        (#"{"platform":"windows","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#, "platform"),
        (#"{"platform":"ios"}"#, "installationId"),
        (#"{"platform":"ios","installationId":"not-a-uuid"}"#, "installationId"),
        (#"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d1"}"#, "installationId"),
        (#"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11","appVersion":"\u0001"}"#, "appVersion"),
        (#"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11","appVersion":"123456789012345678901234567890123"}"#, "appVersion"),
        (#"{"platform":5,"installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#, "platform"),
        (#"{"platform":null,"installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#, "platform"),
        (#"["ios"]"#, "object"),
        (#"{"platform":"ios""#, "JSON"),
    ])
    func badCreationBodiesNameTheField(body: String, field: String) throws {
        let t = try TestGateway()
        let a = t.send("POST", "/v1/weather/session", body: Array(body.utf8))
        #expect(a.status == 400)
        #expect(a.errorCode == "invalid_request")
        let message = try #require((a.json["error"] as? [String: Any])?["message"] as? String)
        #expect(message.contains(field))
    }

    @Test func wrongContentTypeIs415AndBigBodyIs413() throws {
        let t = try TestGateway()
        let body = Array(#"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#.utf8)
        #expect(t.send("POST", "/v1/weather/session", body: body, contentType: "text/plain").status == 415)
        #expect(t.send("POST", "/v1/weather/session", body: body, contentType: "application/json; charset=utf-8").status == 201)
        let big = [UInt8](repeating: 32, count: 4097)
        let a = t.send("POST", "/v1/weather/session", body: big)
        #expect(a.status == 413)
        #expect(a.errorCode == "payload_too_large")
    }

    /// A request held up behind another program's write transaction says how long in its log
    /// line (`db_wait_ms`); one that did not wait says nothing of it.
    @Test func aRequestHeldUpBehindAWriteTransactionSaysSoInItsLogLine() throws {
        let t = try TestGateway()
        _ = t.createSession()
        #expect(t.log.lines.last.map { !$0.contains("db_wait_ms=") } == true, "\(t.log.lines.last ?? "")")

        try t.holdWriteLockElsewhere(for: 0.4)
        _ = t.createSession()
        let line = try #require(t.log.lines.last)
        let waited = try #require(
            line.split(separator: " ").first { $0.hasPrefix("db_wait_ms=") }.flatMap { Int($0.dropFirst("db_wait_ms=".count)) }, "\(line)")
        #expect(waited >= 300 && waited < 5000, "\(line)")
    }
    /// Counters a worker cannot write (a damaged or refusing table) are said once in the log, and
    /// once more when they are written again, with every count kept meanwhile: a drill found a
    /// damaged counters table refusing every flush with nothing logged.
    @Test func countersThatCannotBeWrittenAreSaidOnceAndKept() throws {
        let t = try TestGateway()
        try t.store.db.execute("CREATE TRIGGER refuse_counters BEFORE INSERT ON weather_counters BEGIN SELECT RAISE(ABORT, 'refused'); END")
        for _ in 0..<3 { _ = t.createSession() }
        let failing = t.log.lines.filter { $0.contains("counters=not_written") }
        #expect(failing.count == 1 && failing[0].contains("storage_error="), "\(failing)")

        try t.store.db.execute("DROP TRIGGER refuse_counters")
        _ = t.createSession()
        #expect(t.log.lines.filter { $0.contains("counters=written_again") }.count == 1)
        #expect(try t.store.db.scalarInt("SELECT sum(value) FROM weather_counters WHERE name = 'sessions.created'") == 4)
    }
    /// A refused refresh says why in its log line and the counters, never to the client (one
    /// answer for all): a restore from a backup makes the apps' refresh tokens `unknown`, which
    /// looked like any other refusal (a disaster-recovery drill).
    @Test func aRefusedRefreshSaysWhyInTheLogAndTheCounters() throws {
        let t = try TestGateway()
        func refused(_ answer: TestGateway.Answer) -> String? {
            #expect(answer.status == 401 && answer.errorCode == "invalid_refresh_token")
            return t.log.lines.last?.split(separator: " ").first { $0.hasPrefix("refused=") }.map { String($0.dropFirst("refused=".count)) }
        }
        let s = t.createSession()
        let stranger = "wtr_" + String(repeating: "A", count: 43)
        #expect(refused(t.refresh(s, token: stranger)) == "unknown")

        let other = t.createSession()
        #expect(refused(t.refresh(s, token: other["refreshToken"] as? String)) == "other_session")

        t.clock.advance(31 * 86_400)  // past the refresh token's 30 days
        #expect(refused(t.refresh(s)) == "expired")

        let revoked = t.createSession()
        #expect(
            t.send(
                "POST", "/v1/weather/session/revoke", body: ["anonymousSessionId": revoked["anonymousSessionId"]!, "refreshToken": revoked["refreshToken"]!]
            ).status == 204)
        #expect(refused(t.refresh(revoked)) == "revoked")

        let counted = try t.store.counters(fromHour: "2000-01-01T00", toHour: "2100-01-01T00")
            .filter { $0.name.hasPrefix("refresh_refused.") }.map { "\($0.name)=\($0.value)" }.sorted()
        #expect(counted == ["refresh_refused.expired=1", "refresh_refused.other_session=1", "refresh_refused.revoked=1", "refresh_refused.unknown=1"])
        #expect(try t.store.counters(fromHour: "2000-01-01T00", toHour: "2100-01-01T00").allSatisfy { !$0.name.hasPrefix("unauthorized.") })
    }
    /// A database file deleted or moved under a running worker is said once in its log (only
    /// `/v1/health`'s 503 told, a disaster-recovery drill), and the worker goes on serving.
    @Test func aDatabaseFileGoneFromUnderTheWorkerIsSaidOnce() throws {
        let t = try TestGateway()
        _ = t.createSession()
        #expect(!t.log.lines.contains { $0.contains("database=gone") })
        try FileManager.default.moveItem(atPath: t.config.databasePath, toPath: t.config.databasePath + ".moved")
        _ = t.createSession()
        _ = t.createSession()
        let said = t.log.lines.filter { $0.contains("database=gone") }
        #expect(said.count == 1 && said[0].contains("INSTALL.md: A deleted database"), "\(said)")
        #expect(t.send("GET", "/v1/health").status == 503)
    }
}
