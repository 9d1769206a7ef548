import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Sessions through nginx to 2+ worker processes sharing one SQLite file.
@Suite(.serialized) struct SessionEndToEndTests {
    static let legacy = "legacy-token-0123456789"

    @Test func databaseFilesHoldOnlyHashes() throws {
        let h = try GatewayHarness(workers: 2)
        let installation = UUID().uuidString
        let s = try h.createSession(installationId: installation)
        let r = try h.request(
            "POST", "/v1/weather/session/refresh", json: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!])
        #expect(r.status == 200)
        let access = s["weatherAccessToken"] as! String
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE token_hash = '\(sha256Hex(access))'") == "1")
        // Nothing secret in the main file or the WAL, in either case.
        let files = ["", "-wal", "-shm"].map { h.databasePath + $0 }
        var bytes = Data()
        for f in files { bytes.append((try? Data(contentsOf: URL(fileURLWithPath: f))) ?? Data()) }
        #expect(bytes.count > 4096)
        for secret in [
            access, s["refreshToken"] as! String, r.json["weatherAccessToken"] as! String, r.json["refreshToken"] as! String,
            installation, installation.lowercased(), String(access.dropFirst(4)),
        ] {
            #expect(bytes.range(of: Data(secret.utf8)) == nil, "secret found in the database files")
        }
        #expect(!h.log.contains(String(access.dropFirst(4))))
        #expect(!h.log.lowercased().contains(installation.lowercased()))
    }

    @Test func sixteenConcurrentRefreshesAcrossProcessesYieldOneLivePair() throws {
        let h = try GatewayHarness(workers: 4)
        let s = try h.createSession()
        let body: [String: Any] = ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!]
        let answers = concurrently(16, port: h.port, "POST", "/v1/weather/session/refresh", json: jsonBytes(body)).answers
        #expect(answers.count == 16)
        #expect(answers.allSatisfy { $0.status == 200 })
        // Across processes: one worker alone would hand out the retry window's copy in turn.
        let workers = workersAnswering(answers, log: h.log)
        #expect(workers.count >= 2, "\(workers)")
        #expect(Set(answers.compactMap { $0.json["refreshToken"] as? String }).count == 1)
        #expect(Set(answers.compactMap { $0.json["weatherAccessToken"] as? String }).count == 1)
        let sid = s["anonymousSessionId"] as! String
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NULL") == "1")
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)'") == "4")
    }

    @Test func refreshRetryReplayAndRevokeAcrossWorkers() throws {
        let h = try GatewayHarness(workers: 2, env: ["WEATHER_REFRESH_RETRY_WINDOW": "1"])
        let s = try h.createSession()
        let body: [String: Any] = ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!]
        let first = try h.request("POST", "/v1/weather/session/refresh", json: body)
        let again = try h.request("POST", "/v1/weather/session/refresh", json: body)
        #expect(first.status == 200 && again.status == 200)
        #expect(first.headers["cache-control"] == "no-store" && first.headers["pragma"] == "no-cache")
        #expect(again.json["refreshToken"] as? String == first.json["refreshToken"] as? String)
        #expect(first.json["anonymousSessionId"] as? String == s["anonymousSessionId"] as? String)
        // Past the (1 s) window the old token is a replay: the whole session goes.
        try h.advanceClock(by: 2)
        let replay = try h.request("POST", "/v1/weather/session/refresh", json: body)
        #expect(replay.status == 401)
        #expect(replay.errorCode == "refresh_token_reused")
        let sid = s["anonymousSessionId"] as! String
        #expect(h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(sid)'") == "revoked")
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND revoked_at IS NULL") == "0")
        let successor: [String: Any] = ["anonymousSessionId": sid, "refreshToken": first.json["refreshToken"]!]
        #expect(try h.request("POST", "/v1/weather/session/refresh", json: successor).errorCode == "invalid_refresh_token")
    }

    @Test func authenticationOrderAndRevokeThroughNginx() throws {
        let fake = try FakeProviders()
        var env = fake.environment()
        env["CLOSET_WEATHER_PROXY_TOKEN"] = Self.legacy
        env["WEATHER_ACCESS_TOKEN_TTL"] = "2"
        env["WEATHER_REFRESH_AFTER"] = "1"
        let h = try GatewayHarness(workers: 2, env: env)
        h.companions.append(fake)
        let s = try h.createSession()
        let access = s["weatherAccessToken"] as! String
        func weather(_ headers: [String: String]) throws -> HTTPResponse { try h.request("GET", "/v1/weather?lat=31.2304&lon=121.4737", headers: headers) }

        let ok = try weather(["X-Weather-Session-Token": access])
        #expect(ok.status == 200)
        #expect(ok.json["authMode"] as? String == "weather_session")
        #expect(try weather(["X-Weather-Session-Token": access, "X-Weather-Token": Self.legacy]).json["authMode"] as? String == "weather_session")
        let fallback = try weather(["X-Weather-Session-Token": "wta_" + String(repeating: "Z", count: 43), "X-Weather-Token": Self.legacy])
        #expect(fallback.json["authMode"] as? String == "weather_token")
        for bad in ["wta_" + String(repeating: "Z", count: 43), String(access.dropLast(3)), s["refreshToken"] as! String, ""] {
            let r = try weather(["X-Weather-Session-Token": bad])
            #expect(r.status == 401)
            #expect(r.errorCode == "unauthorized")
        }
        #expect(try weather(["X-Weather-Token": "legacy-token-wrong-value"]).status == 401)

        let revoked = try h.createSession()
        let rv = try h.request(
            "POST", "/v1/weather/session/revoke", json: ["anonymousSessionId": revoked["anonymousSessionId"]!, "refreshToken": revoked["refreshToken"]!])
        #expect(rv.status == 204)
        #expect(try weather(["X-Weather-Session-Token": revoked["weatherAccessToken"] as! String]).status == 401)
        #expect(
            try h.request(
                "POST", "/v1/weather/session/refresh", json: ["anonymousSessionId": revoked["anonymousSessionId"]!, "refreshToken": revoked["refreshToken"]!]
            ).status == 401)

        // Expiry (2 s access TTL).
        try h.advanceClock(by: 2)
        #expect(try weather(["X-Weather-Session-Token": access]).status == 401)
    }

    @Test func legacyPathIsOffWhenUnconfigured() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment())
        h.companions.append(fake)
        #expect(try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": Self.legacy]).status == 401)
    }

    @Test func everyBadInputGetsItsEnvelopeAndServiceKeepsServing() throws {
        let h = try GatewayHarness(workers: 2)
        let s = try h.createSession()
        let cases: [(String, String, [String: String], [UInt8]?, Int, String)] = [
            ("POST", "/v1/weather/session", ["Content-Type": "text/plain"], Array("{}".utf8), 415, "unsupported_media_type"),
            ("POST", "/v1/weather/session", ["Content-Type": "application/json"], Array("{".utf8), 400, "invalid_request"),
            ("POST", "/v1/weather/session", ["Content-Type": "application/json"], Array(#"{"platform":"ios"}"#.utf8), 400, "invalid_request"),
            ("POST", "/v1/weather/session", ["Content-Type": "application/json"], [UInt8](repeating: 0x20, count: 5000), 413, "payload_too_large"),
            ("POST", "/v1/weather/session", ["Content-Type": "application/json"], Array(String(repeating: "[", count: 3000).utf8), 400, "invalid_request"),
            ("POST", "/v1/weather/session", ["Content-Type": "application/json"], [0x7b, 0xff, 0xfe, 0x7d], 400, "invalid_request"),
            (
                "POST", "/v1/weather/session/refresh", ["Content-Type": "application/json"], Array(#"{"anonymousSessionId":"x","refreshToken":"wtr_x"}"#.utf8),
                400, "invalid_request"
            ),
            (
                "POST", "/v1/weather/session/revoke", ["Content-Type": "application/json"], Array(#"{"anonymousSessionId":"aws_abc"}"#.utf8), 400,
                "invalid_request"
            ),
            ("GET", "/v1/weather/session", [:], nil, 405, "method_not_allowed"),
            ("GET", "/v1/weather?lat=91&lon=0", ["X-Weather-Session-Token": s["weatherAccessToken"] as! String], nil, 400, "invalid_request"),
            ("GET", "/v1/weather?lat=1&lon=0", [:], nil, 401, "unauthorized"),
            ("GET", "/v1/weathr", [:], nil, 404, "not_found"),
        ]
        for (method, path, headers, body, status, code) in cases {
            let r = try HTTPClient.send(port: h.port, method, path, headers: headers, body: body)
            #expect(r.status == status, "\(method) \(path)")
            #expect(r.errorCode == code, "\(method) \(path): \(r.text.prefix(120))")
            #expect(r.headers["content-type"] == "application/json; charset=utf-8")
        }
        #expect(try h.request("GET", "/v1/health").status == 200)
        #expect(h.app?.isRunning == true)
    }
}

/// Lowercase hex SHA-256 via the system's sha256sum (independent of the code under test).
func sha256Hex(_ text: String) -> String {
    String(ChildProcessOutput.run("/usr/bin/sha256sum", [], stdin: Data(text.utf8)).prefix(64))
}
