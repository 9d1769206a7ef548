import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The six limits through nginx with several workers. The "hour" is an hour and the "day" an hour
/// too (`WEATHER_LIMIT_DAY_SECONDS`: a day's Retry-After would outlast the 12-hour access token the
/// retry carries), and time moves only by `advanceClock`: with windows of 4 s (as these tests once
/// ran), a slow run under load could see a quota start over between two requests.
@Suite(.serialized) struct LimitEndToEndTests {
    static let legacy = "legacy-token-0123456789"

    /// Every limit off except the ones a test turns on.
    func harness(workers: Int = 2, _ limits: [String: String], extra: [String: String] = [:]) throws -> (GatewayHarness, FakeProviders) {
        let fake = try FakeProviders()
        var env = fake.environment()
        for name in [
            "WEATHER_SESSION_CREATE_PER_IP_PER_HOUR", "WEATHER_REFRESH_PER_SESSION_PER_HOUR", "WEATHER_REQUESTS_PER_SESSION_PER_HOUR",
            "WEATHER_REQUESTS_PER_IP_PER_HOUR", "WEATHER_GRID_CELLS_PER_SESSION_PER_DAY", "WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR",
        ] {
            env[name] = "0"
        }
        env.merge(limits) { $1 }
        env.merge([
            "WEATHER_LIMIT_DAY_SECONDS": "3600", "CLOSET_WEATHER_PROXY_TOKEN": Self.legacy, "WEATHER_TRUSTED_PROXIES": "127.0.0.1/32",
        ]) { $1 }
        env.merge(extra) { $1 }
        let h = try GatewayHarness(workers: workers, env: env)
        h.companions.append(fake)
        return (h, fake)
    }

    /// Moves the gateway's clock exactly the announced Retry-After and checks the request then
    /// passes with the status it would have had unlimited (`served`: 200, or 201 for a creation).
    func retryAfterIsTruthful(_ h: GatewayHarness, _ limited: HTTPResponse, served: Int = 200, _ retry: () throws -> HTTPResponse) throws {
        #expect(limited.status == 429)
        #expect(limited.errorCode == "rate_limited")
        let seconds = try #require(limited.headers["retry-after"].flatMap(Int.init))
        #expect((1...3_600).contains(seconds))
        try h.advanceClock(by: seconds)
        let again = try retry()
        #expect(again.status == served, "after Retry-After \(seconds): \(again.status) \(again.text)")
    }

    @Test func sessionCreationPerIPWithSpoofedAndTrustedForwardedFor() throws {
        // Trusted proxy is 127.0.0.1 (nginx passes REMOTE_ADDR = the loopback client).
        let (h, _) = try harness(["WEATHER_SESSION_CREATE_PER_IP_PER_HOUR": "2"], extra: ["WEATHER_TRUSTED_PROXIES": ""])
        func create(_ xff: String? = nil) throws -> HTTPResponse {
            try h.request(
                "POST", "/v1/weather/session", headers: xff.map { ["X-Forwarded-For": $0] } ?? [:],
                json: ["platform": "ios", "installationId": UUID().uuidString])
        }
        #expect(try create().status == 201)
        #expect(try create().status == 201)
        // Untrusted peer: a made-up X-Forwarded-For opens no new quota.
        let limited = try create("203.0.113.9")
        try retryAfterIsTruthful(h, limited, served: 201) { try create() }
    }

    @Test func trustedProxyForwardedForAndIPv6Clients() throws {
        let (h, _) = try harness(["WEATHER_SESSION_CREATE_PER_IP_PER_HOUR": "1"])
        func create(_ xff: String) throws -> HTTPResponse {
            try h.request("POST", "/v1/weather/session", headers: ["X-Forwarded-For": xff], json: ["platform": "ios", "installationId": UUID().uuidString])
        }
        #expect(try create("203.0.113.1").status == 201)
        #expect(try create("203.0.113.1").status == 429)
        #expect(try create("203.0.113.2").status == 201, "another client behind the trusted proxy")
        #expect(try create("2001:db8::1").status == 201)
        #expect(try create("2001:DB8:0:0::1").status == 429, "the same IPv6 client, other spelling")
        #expect(try create("2001:db8::2").status == 429, "the same IPv6 /64, another address")
        #expect(try create("2001:db8:0:1::2").status == 201, "another /64")
        // An IPv6 peer straight on the FastCGI socket (no proxy in between).
        let body = #"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#
        func direct() -> String {
            ChildProcessOutput.run(
                "/usr/bin/cgi-fcgi", ["-bind", "-connect", h.socketPath],
                environment: [
                    "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "CONTENT_TYPE": "application/json",
                    "CONTENT_LENGTH": "\(body.utf8.count)", "REMOTE_ADDR": "2001:db8:ffff::5",
                ], stdin: Data(body.utf8))
        }
        #expect(direct().hasPrefix("Status: 201"))
        #expect(direct().hasPrefix("Status: 429"))
    }

    @Test func refreshPerSession() throws {
        let (h, _) = try harness(["WEATHER_REFRESH_PER_SESSION_PER_HOUR": "2"])
        var s = try h.createSession()
        for _ in 0..<2 {
            let r = try h.request(
                "POST", "/v1/weather/session/refresh", json: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!])
            #expect(r.status == 200)
            s = r.json
        }
        let proof: [String: Any] = ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!]
        let limited = try h.request("POST", "/v1/weather/session/refresh", json: proof)
        let other = try h.createSession()
        #expect(
            try h.request(
                "POST", "/v1/weather/session/refresh", json: ["anonymousSessionId": other["anonymousSessionId"]!, "refreshToken": other["refreshToken"]!]
            ).status == 200)
        try retryAfterIsTruthful(h, limited) { try h.request("POST", "/v1/weather/session/refresh", json: proof) }
    }

    @Test func weatherPerSessionAndPerIP() throws {
        let (h, _) = try harness(["WEATHER_REQUESTS_PER_SESSION_PER_HOUR": "2", "WEATHER_REQUESTS_PER_IP_PER_HOUR": "3"])
        let a = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
        let b = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
        let c = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
        func weather(_ auth: [String: String], xff: String = "198.51.100.1") throws -> HTTPResponse {
            try h.request("GET", "/v1/weather?lat=1&lon=1", headers: auth.merging(["X-Forwarded-For": xff]) { $1 })
        }
        #expect(try weather(a).status == 200)
        #expect(try weather(a).status == 200)
        #expect(try weather(a).status == 429, "session quota")
        #expect(try weather(b).status == 200, "another session is unaffected")
        let ipLimited = try weather(b)  // 4th request from this IP (the refused one did not count)
        #expect(ipLimited.status == 429, "IP quota")
        #expect(try weather(b, xff: "198.51.100.2").status == 200, "another IP is unaffected")
        // The address's Retry-After, checked with a session that has units left: b has just spent
        // its second, so its own quota (2 an hour) could refuse the retry whenever the address's
        // wait is the shorter.
        try retryAfterIsTruthful(h, ipLimited) { try weather(c) }
    }

    @Test func distinctGridCellsPerSession() throws {
        let (h, _) = try harness(["WEATHER_GRID_CELLS_PER_SESSION_PER_DAY": "2"])
        let a = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
        func weather(_ auth: [String: String], _ lat: Int) throws -> HTTPResponse { try h.request("GET", "/v1/weather?lat=\(lat)&lon=1", headers: auth) }
        #expect(try weather(a, 10).status == 200)
        #expect(try weather(a, 20).status == 200)
        #expect(try weather(a, 10).status == 200, "a cell already seen")
        let limited = try weather(a, 30)
        let b = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String]
        #expect(try weather(b, 30).status == 200)
        try retryAfterIsTruthful(h, limited) { try weather(a, 30) }
    }

    @Test func legacyTokenPerIP() throws {
        let (h, _) = try harness(["WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR": "2"])
        func legacy(_ xff: String = "198.51.100.1") throws -> HTTPResponse {
            try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": Self.legacy, "X-Forwarded-For": xff])
        }
        let first = try legacy()
        #expect(first.status == 200, "\(first.text)")
        #expect(try legacy().status == 200)
        let limited = try legacy()
        #expect(try legacy("198.51.100.2").status == 200)
        let session = ["X-Weather-Session-Token": try h.createSession()["weatherAccessToken"] as! String, "X-Forwarded-For": "198.51.100.1"]
        #expect(try h.request("GET", "/v1/weather?lat=1&lon=1", headers: session).status == 200, "sessions are not on the legacy quota")
        try retryAfterIsTruthful(h, limited) { try legacy() }
    }

    @Test func nAllowedMeansNServedAcrossWorkers() throws {
        let (h, _) = try harness(workers: 4, ["WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR": "10"])
        _ = try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": Self.legacy, "X-Forwarded-For": "198.51.100.200"])  // warm the cache
        let answers = concurrently(
            40, port: h.port, "GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": Self.legacy, "X-Forwarded-For": "198.51.100.1"]
        ).answers
        #expect(answers.count == 40)
        #expect(answers.filter { $0.status == 200 }.count == 10)
        #expect(answers.filter { $0.status == 429 }.count == 30)
        // The requests really were spread over several processes.
        let workers = Set(
            h.log.split(separator: "\n").filter { $0.contains("route=/v1/weather ") }.compactMap { line in
                line.split(separator: " ").first { $0.hasPrefix("worker=") }
            })
        #expect(workers.count >= 2, "\(workers)")
        // The bucket all of them drew from is the machine's shared table (the `-writer` file), not
        // a row: no take was a SQLite write.
        #expect(h.sql("SELECT count(*) FROM weather_rate_limits") == "0")
    }
}
