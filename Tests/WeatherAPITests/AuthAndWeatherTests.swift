import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
@testable import WeatherStore
import WeatherProviders

@Suite struct AuthenticationTests {
    @Test func accessTokenAuthenticatesWithSessionMode() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let a = t.weather(token: s["weatherAccessToken"] as? String)
        #expect(a.status == 200)
        #expect(a.json["authMode"] as? String == "weather_session")
    }

    @Test func sessionTokenWinsOverValidLegacyToken() throws {
        let t = try TestGateway()
        let s = t.createSession()
        #expect(t.weather(token: s["weatherAccessToken"] as? String, legacy: "legacy-token-0123456789").json["authMode"] as? String == "weather_session")
    }

    @Test func badSessionTokenFallsBackToValidLegacyToken() throws {
        let t = try TestGateway()
        let a = t.weather(token: "wta_" + String(repeating: "x", count: 43), legacy: "legacy-token-0123456789")
        #expect(a.status == 200)
        #expect(a.json["authMode"] as? String == "weather_token")
        #expect(t.weather(token: nil, legacy: "legacy-token-012345678X").status == 401)
    }

    @Test func wrongTruncatedExpiredRevokedAndRefreshTokensGet401() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let access = s["weatherAccessToken"] as! String
        #expect(t.weather(token: "wta_" + String(repeating: "A", count: 43)).errorCode == "unauthorized")
        #expect(t.weather(token: String(access.dropLast())).status == 401)
        #expect(t.weather(token: s["refreshToken"] as? String).status == 401)
        #expect(t.weather(token: nil).status == 401)
        t.clock.advance(12 * 3600)
        #expect(t.weather(token: access).status == 401)
        let s2 = t.createSession()
        _ = t.send("POST", "/v1/weather/session/revoke", body: ["anonymousSessionId": s2["anonymousSessionId"]!, "refreshToken": s2["refreshToken"]!])
        #expect(t.weather(token: s2["weatherAccessToken"] as? String).status == 401)
    }

    @Test func legacyPathIsOffWhenUnconfigured() throws {
        let t = try TestGateway { $0.legacyToken = nil }
        #expect(t.weather(token: nil, legacy: "legacy-token-0123456789").status == 401)
        #expect(t.weather(token: nil, legacy: "").status == 401)
    }

    /// Once the legacy path is off, an old app's `X-Weather-Token` is told so (the generic 401
    /// said a valid one would do), and each weather 401 says why in its log line and counters,
    /// so an operator tells old app builds from guesses and from ended sessions.
    @Test func a401SaysWhyAndAnOldAppIsToldTheLegacyPathIsOff() throws {
        let off = try TestGateway {
            $0.legacyToken = nil; $0.flushInterval = 0
        }
        let old = off.weather(token: nil, legacy: "legacy-token-0123456789")
        #expect(old.status == 401 && old.errorCode == "unauthorized")
        let message = try #require((old.json["error"] as? [String: Any])?["message"] as? String)
        #expect(message.contains("no longer accepts X-Weather-Token") && message.contains("update the app"), "\(message)")
        #expect(off.log.lines.last?.hasSuffix(" refused=legacy_off") == true, "\(off.log.lines.last ?? "")")
        let none = off.weather(token: nil)
        #expect(none.status == 401 && off.log.lines.last?.hasSuffix(" refused=no_token") == true)
        #expect((none.json["error"] as? [String: Any])?["message"] as? String == "a live X-Weather-Session-Token is required")
        // An app sending both whose session ended is told about its session, not to update.
        let both = off.weather(token: "wta_" + String(repeating: "A", count: 43), legacy: "legacy-token-0123456789")
        #expect(both.status == 401 && off.log.lines.last?.hasSuffix(" refused=session_token") == true)
        #expect((both.json["error"] as? [String: Any])?["message"] as? String == "a live X-Weather-Session-Token is required")
        // An empty session header is no session token.
        _ = off.weather(token: "", legacy: "legacy-token-0123456789")
        #expect(off.log.lines.last?.hasSuffix(" refused=legacy_off") == true, "\(off.log.lines.last ?? "")")

        let on = try TestGateway { $0.flushInterval = 0 }
        let wrong = on.weather(token: nil, legacy: "legacy-token-012345678X")
        #expect(wrong.status == 401 && (wrong.json["error"] as? [String: Any])?["message"] as? String == HTTPError.unauthorized.message)
        #expect(on.log.lines.last?.hasSuffix(" refused=legacy_token") == true)
        let dead = "wta_" + String(repeating: "A", count: 43)
        _ = on.weather(token: dead)
        #expect(on.log.lines.last?.hasSuffix(" refused=session_token") == true)
        _ = on.weather(token: dead, legacy: "legacy-token-012345678X")
        #expect(on.log.lines.last?.hasSuffix(" refused=session_token") == true, "a session token names the session")
        _ = on.weather(token: nil)
        #expect(on.log.lines.last?.hasSuffix(" refused=no_token") == true)
        #expect(!on.log.lines.joined().contains("012345678X"))

        on.gateway.afterResponse(force: true)
        off.gateway.afterResponse(force: true)
        let counted = try on.store.db.statement("SELECT name, value FROM weather_counters WHERE name LIKE 'unauthorized.%' ORDER BY name").rows {
            "\($0.text(0)!)=\($0.int(1))"
        }
        #expect(counted == ["unauthorized.legacy_token=1", "unauthorized.no_token=1", "unauthorized.session_token=2"])
        #expect(try off.store.db.scalarInt("SELECT value FROM weather_counters WHERE name = 'unauthorized.legacy_off'") == 2)
        #expect(try off.store.db.scalarInt("SELECT value FROM weather_counters WHERE name = 'unauthorized.session_token'") == 1)
    }

    @Test func authModeIsCountedPerHourInBatches() throws {
        let t = try TestGateway { $0.flushInterval = 10 }
        let s = t.createSession()
        _ = t.weather(token: s["weatherAccessToken"] as? String)
        _ = t.weather(token: nil, legacy: "legacy-token-0123456789")
        #expect(try t.store.db.scalarInt("SELECT count(*) FROM weather_counters") == 0)
        t.clock.advance(10)
        _ = t.weather(token: nil, legacy: "legacy-token-0123456789")
        let rows = try t.store.db.statement("SELECT name, value FROM weather_counters WHERE name LIKE 'auth.%' ORDER BY name").rows {
            "\($0.text(0)!)=\($0.int(1))"
        }
        #expect(rows == ["auth.weather_session=1", "auth.weather_token=2"])
    }

    @Test func lastSeenMovesWithoutAWritePerRequest() throws {
        let t = try TestGateway()
        let s = t.createSession()
        let token = s["weatherAccessToken"] as? String
        t.clock.advance(30)
        _ = t.weather(token: token)
        #expect(try t.store.db.scalarText("SELECT last_seen_at FROM anonymous_weather_sessions") == "2026-11-30T02:00:00Z")
        t.clock.advance(60)
        _ = t.weather(token: token)
        _ = t.weather(token: token)
        #expect(try t.store.db.scalarText("SELECT last_seen_at FROM anonymous_weather_sessions") == "2026-11-30T02:01:30Z")
    }
}

@Suite struct ConventionTests {
    @Test func everyResponseHasRequestIdAndNosniff() throws {
        let t = try TestGateway()
        for a in [t.send("GET", "/v1/health"), t.send("GET", "/nope"), t.send("PUT", "/v1/weather")] {
            #expect(a.headers["x-request-id"]?.isEmpty == false)
            #expect(a.headers["x-content-type-options"] == "nosniff")
            #expect(a.headers["content-type"] == "application/json; charset=utf-8")
        }
        let echoed = t.send("GET", "/v1/health", headers: ["X-Request-Id": "abc123"])
        #expect(echoed.headers["x-request-id"] == "abc123")
        #expect(t.log.lines.last?.contains("request_id=abc123") == true)
        // nginx's ids (32 hex digits), Apache's (mod_unique_id: base64url, or letters, digits, `@`
        // and `-` in older 2.4 releases) and dots between letters are echoed.
        for kept in [
            "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c", "Z2xhc3Nlcy1hYmM_DEF-x", "VAYyin8AAAEAAAKa@DMAAAAB", "Z@-x@Yk3AAAAAB@@0Ng-AAAAL",
            "ios.app-1.x", "0b6f1c4e-6f5a-4c0e-9d2b",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ] {
            #expect(t.send("GET", "/v1/health", headers: ["X-Request-Id": kept]).headers["x-request-id"] == kept)
        }
        // Refused, not cleaned: the gateway's own id instead (`t-<n>`), in the header and the log.
        // Nor is a token echoed or logged (a client behind an `.htaccess` sends the header as it likes).
        let token = try #require(t.createSession()["weatherAccessToken"] as? String)
        for value in [
            "a b\r\nSet-Cookie: x", "a\r\nSet-Cookie:x", "abc\u{0}", String(repeating: "a", count: 129), "id;drop", "apache-t=1764762000000000",
            token, "wtr_abcdefghijklmnop", "req-\(token)", "x-wta_abc",
            // A token's body without its prefix (43 base64url characters).
            String(token.dropFirst(4)), "id." + String(token.dropFirst(4)),
            // An installation id or a coordinate is not logged either.
            "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11", "req-0B6F1C4E-6F5A-4C0E-9D2B-2C1E8F3A7D11-2", "31.230416-121.473701", "lat31.2",
        ] {
            let hostile = t.send("GET", "/v1/health", headers: ["X-Request-Id": value])
            let id = try #require(hostile.headers["x-request-id"])
            #expect(id.hasPrefix("t-") && UInt64(id.dropFirst(2)) != nil, "\(value.debugDescription) gave \(id.debugDescription)")
            #expect(hostile.headers["set-cookie"] == nil)
            let line = try #require(t.log.lines.last)
            #expect(line.contains("request_id=\(id) "))
            #expect(!line.contains("\r") && !line.contains("\n") && !line.contains("Set-Cookie"))
            #expect(!line.contains(String(value.suffix(20))))
        }
        // An id holding the legacy token is logged as ours, never as sent, but answered as sent,
        // exactly as one a byte away: the answer cannot be used to guess the token (it was ours
        // for the one and the client's for the other until session 35).
        for (value, holdsToken) in [
            ("legacy-token-0123456789", true), ("req-legacy-token-0123456789-a", true), ("legacy-token-0123456780", false),
            ("req-legacy-token-0123456780-a", false),
        ] {
            let answer = t.send("GET", "/v1/health", headers: ["X-Request-Id": value])
            #expect(answer.headers["x-request-id"] == value)
            let line = try #require(t.log.lines.last)
            #expect(line.contains("request_id=\(value) ") != holdsToken, "\(line)")
            #expect(!line.contains("legacy-token-0123456789"))
        }
    }

    /// The legacy token's search in a client's request id compares every byte of every window
    /// (API.md: constant-time) and finds what the plain search finds: at the start, the end, the
    /// middle, overlapping near-misses, one byte off anywhere, longer than the id.
    @Test func theLegacyTokensSearchInARequestIdAgreesWithThePlainOne() {
        var generator = SystemRandomNumberGenerator()
        let secret = Array("legacy-token-0123456789".utf8)
        var cases: [[UInt8]] = [
            secret, Array("req.".utf8) + secret, secret + Array(".1".utf8), Array(secret.dropLast()),
            Array("legacy-legacy-token-0123456789x".utf8), [], Array(secret.prefix(5)),
        ]
        for _ in 0..<2_000 {
            var id = (0..<Int.random(in: 0...128, using: &generator)).map { _ in UInt8.random(in: 0x61...0x64, using: &generator) }
            if id.count >= secret.count, Bool.random(using: &generator) {
                let at = Int.random(in: 0...(id.count - secret.count), using: &generator)
                id.replaceSubrange(at..<(at + secret.count), with: secret)
                if Bool.random(using: &generator) { id[at + Int.random(in: 0..<secret.count, using: &generator)] ^= 1 }
            }
            cases.append(id)
        }
        for id in cases {
            id.withUnsafeBufferPointer { text in
                secret.withUnsafeBufferPointer { secret in
                    #expect(Gateway.occursInConstantTime(secret, in: text) == Gateway.occurs(secret, in: text), "\(String(decoding: text, as: UTF8.self))")
                }
            }
        }
    }

    /// A method that is not one of HTTP's is logged as `other`: a FastCGI peer or a CGI caller
    /// may send anything there (a security re-audit found a coordinate and a token logged).
    @Test func anUnknownMethodIsLoggedAsOther() throws {
        let t = try TestGateway()
        for method in ["31.234567", "legacy-token-0123456789", "BREW"] {
            let a = t.send(method, "/v1/health")
            #expect(a.status == 400 || a.status == 405)
            let line = try #require(t.log.lines.last)
            #expect(line.contains(" method=other ") && !line.contains(method), "\(line)")
        }
        _ = t.send("GET", "/v1/health")
        #expect(t.log.lines.last?.contains(" method=GET ") == true)
    }

    @Test func unknownRouteIs404AndWrongMethodIs405WithAllow() throws {
        let t = try TestGateway()
        let a = t.send("GET", "/v2/weather")
        #expect(a.status == 404)
        #expect(a.errorCode == "not_found")
        let b = t.send("GET", "/v1/weather/session")
        #expect(b.status == 405)
        #expect(b.headers["allow"] == "POST")
        #expect(b.errorCode == "method_not_allowed")
    }

    @Test func logLinesCarryNoSecrets() throws {
        let t = try TestGateway()
        let s = t.createSession(installationId: "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11")
        let refreshed = t.refresh(s)
        #expect(refreshed.status == 200)
        let weather = t.weather(token: refreshed.json["weatherAccessToken"] as? String, query: "lat=31.2304&lon=121.4737")
        #expect(weather.status == 200)
        let all = t.log.lines.joined(separator: "\n")
        for token in [s["weatherAccessToken"], s["refreshToken"], refreshed.json["weatherAccessToken"], refreshed.json["refreshToken"]] {
            let token = try #require(token as? String)
            #expect(!all.contains(token))
            #expect(!all.contains(String(token.dropFirst(4))), "a token's secret part")
        }
        #expect(!all.contains("0b6f1c4e"))
        #expect(!all.contains("31.2304"))
        #expect(!all.contains("121.4737"))
        #expect(all.contains("status=200"))
    }
}

@Suite struct WeatherRouteTests {
    @Test func secondRequestInCellIsAHitWithoutProviderCall() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let first = t.weather(token: token, query: "lat=31.2304&lon=121.4737")
        #expect(first.json["cache"] as? String == "miss")
        let second = t.weather(token: token, query: "lat=31.2299&lon=121.4501")
        #expect(second.json["cache"] as? String == "hit")
        #expect(t.source.calls == 1)
        let location = try #require(second.json["location"] as? [String: Any])
        #expect(location["lat"] as? Double == 31.25)
        #expect(location["lon"] as? Double == 121.45)
        #expect(second.json["current"] != nil)
        #expect(((second.json["current"] as? [String: Any])?["apparentTemperatureC"]) is NSNull)
    }

    @Test func staleCopyServedWhenProvidersFailAndErrorsOtherwise() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        _ = t.weather(token: token)
        t.clock.advance(601)
        t.source.failure = .providerError
        let stale = t.weather(token: token)
        #expect(stale.status == 200)
        #expect(stale.json["cache"] as? String == "stale")
        t.clock.advance(21_600)
        #expect(t.weather(token: token).errorCode == "provider_error")
        t.source.failure = .timeout
        let slow = t.weather(token: token)
        #expect(slow.status == 504)
        #expect(slow.errorCode == "provider_timeout")
    }

    @Test func notConfiguredIs503() throws {
        let t = try TestGateway()
        t.source.isConfigured = false
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token).errorCode == "provider_not_configured")
    }

    @Test(arguments: [
        "lon=121.4", "lat=31.2", "lat=91&lon=1", "lat=-90.5&lon=1", "lat=1&lon=180.01", "lat=nan&lon=1", "lat=inf&lon=1",
        "lat=1e1&lon=1", "lat=0x1&lon=1", "lat=1&lon=", "lat=1&lon=2&days=0", "lat=1&lon=2&days=16", "lat=1&lon=2&days=3.5",
        "lat=1&lat=2&lon=3", "lat=%ZZ&lon=1", "lat=1.&lon=2", "lat=.5&lon=2",
        // Beyond a bound by less than a Double can tell (they read as 90 and -180).
        "lat=90.0000000000000000001&lon=1", "lat=-90.000000000000000001&lon=1", "lat=1&lon=-180.000000000000000001",
        "lat=1&lon=180.00000000000000000100",
    ])
    func badWeatherParametersAre400(query: String) throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let a = t.weather(token: token, query: query)
        #expect(a.status == 400)
        #expect(a.errorCode == "invalid_request")
    }

    /// A value whose escapes are malformed, or not UTF-8, or NUL, is refused naming its parameter
    /// (API.md: the message names the field); a name that is not plain is not repeated.
    @Test func aBadlyEncodedValueNamesItsParameter() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        for (query, message) in [
            ("lat=%ZZ&lon=1", "parameter lat is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&lon=%FF", "parameter lon is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&lon=2&days=%00", "parameter days is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&lon=2&start=%FF&end=2026-12-02", "parameter start is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&lon=2&start=2026-12-01&end=%ZZ", "parameter end is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&lon=2&x%3Cy%3E=%ZZ", "the query string is not valid percent-encoded UTF-8 without NUL"),
            // A name no route reads might be a secret: not repeated.
            ("lat=1&lon=2&legacytoken0123456789=%FF", "the query string is not valid percent-encoded UTF-8 without NUL"),
            ("lat=1&%ZZ=2", "the query string is not valid percent-encoded UTF-8 without NUL"),
        ] {
            let a = t.weather(token: token, query: query)
            #expect(a.status == 400 && (a.json["error"] as? [String: Any])?["message"] as? String == message, "\(query)")
        }
    }

    /// Text that rounds to a bound but is within it, or is the bound, stays accepted.
    @Test(arguments: [
        "lat=89.99999999999999999999&lon=1", "lat=-90.00000000000000000000&lon=1", "lat=090&lon=-180.0",
        "lat=1&lon=179.999999999999999999", "lat=%2B90&lon=-000180.000",
    ])
    func coordinatesAtTheBoundsAreAccepted(query: String) throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: query).status == 200)
    }

    @Test(arguments: [
        "lat=1&lon=2&start=2026-12-20", "lat=1&lon=2&start=2026-12-20&end=2026-12-19", "lat=1&lon=2&start=2026-12-01&end=2026-12-16",
        "lat=1&lon=2&start=2026-13-01&end=2026-13-02", "lat=1&lon=2&start=2026-02-30&end=2026-03-01", "lat=1&lon=2&start=2027-12-20&end=2027-12-21",
        "lat=1&lon=2&start=2026-11-01&end=2026-11-02", "lat=1&lon=2&start=20261220&end=20261221",
    ])
    func badTripParametersAre400(query: String) throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let a = t.weather(token: token, query: query, path: "/v1/weather/trip")
        #expect(a.status == 400)
        #expect(a.errorCode == "invalid_request")
    }

    /// "Not more than 1 year ahead", in the traveller's date, which may be a day ahead of UTC's:
    /// a trip may end a year from tomorrow (UTC), counted in the calendar, also across a 29 February.
    @Test func tripMayEndAYearFromTomorrow() throws {
        let t = try TestGateway()  // 2026-11-30 UTC
        var token = t.createSession()["weatherAccessToken"] as? String
        func trip(_ start: String, _ end: String) -> Int {
            t.weather(token: token, query: "lat=1&lon=2&start=\(start)&end=\(end)", path: "/v1/weather/trip").status
        }
        #expect(trip("2027-11-30", "2027-12-01") == 200)
        #expect(trip("2027-11-30", "2027-12-02") == 400)
        t.clock.advance(91 * 86_400)  // 2027-03-01: the year ahead holds 29 February 2028
        token = t.createSession()["weatherAccessToken"] as? String
        #expect(trip("2028-03-01", "2028-03-02") == 200)
        #expect(trip("2028-03-01", "2028-03-03") == 400)
    }

    @Test func tripHasNoCurrentAndExactDays() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let a = t.weather(token: token, query: "lat=1&lon=2&start=2026-12-20&end=2026-12-24", path: "/v1/weather/trip")
        #expect(a.status == 200)
        #expect(a.json["current"] == nil)
        // The provider is asked for exactly those days, and they are what the answer carries.
        #expect(t.source.lastQuery == .trip(start: LocalDate(year: 2026, month: 12, day: 20)!, end: LocalDate(year: 2026, month: 12, day: 24)!))
        let dates = (a.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String }
        #expect(dates == ["2026-12-20", "2026-12-21", "2026-12-22", "2026-12-23", "2026-12-24"])
        // Another trip to the same cell is another cache entry, not those days again.
        let b = t.weather(token: token, query: "lat=1&lon=2&start=2026-12-21&end=2026-12-22", path: "/v1/weather/trip")
        #expect((b.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String } == ["2026-12-21", "2026-12-22"])
        #expect(b.json["cache"] as? String == "miss")
    }
}

/// A forecast of any `days`, and a trip within the next days, are cut from one outlook per cell
/// (one provider call, one record at Visual Crossing); before, `days=3` and `days=7` for one
/// cell were two calls, and every trip another.
@Suite struct OutlookTests {
    func dates(_ a: TestGateway.Answer) -> [String]? { (a.json["daily"] as? [[String: Any]])?.compactMap { $0["date"] as? String } }
    func days(from start: String, _ count: Int) -> [String] {
        (0..<count).map { LocalDate(start)!.adding(days: $0).description }
    }

    @Test func everyDaysOfOneCellIsOneProviderCall() throws {
        let t = try TestGateway()  // 2026-11-30T02:00Z
        let token = t.createSession()["weatherAccessToken"] as? String
        let three = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=3")
        #expect(three.json["cache"] as? String == "miss" && dates(three) == days(from: "2026-11-30", 3))
        #expect(t.source.lastQuery == .outlook)
        for n in [7, 15, 1] {
            let a = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=\(n)")
            #expect(a.status == 200 && a.json["cache"] as? String == "hit" && dates(a) == days(from: "2026-11-30", n))
            #expect(a.json["current"] is [String: Any])
        }
        #expect(t.source.calls == 1)
        // Past the TTL with the provider failing: the stale outlook, cut as well.
        t.clock.advance(601)
        t.source.failure = .providerError
        let stale = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=2")
        #expect(stale.json["cache"] as? String == "stale" && dates(stale) == days(from: "2026-11-30", 2))
    }

    /// A forecast is fresh no longer than the place's today: a minute after its midnight the
    /// outlook is fetched again, and `daily[0]` is the new today, not yesterday for the rest of
    /// the TTL; so is a trip from the new today through today+14, which yesterday's outlook
    /// cannot hold (a Caiyun-only gateway answered it 502). A trip's own row keeps its TTL.
    @Test func aForecastIsFreshNoLongerThanThePlacesToday() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:55:00Z")!  // 23:55 in Shanghai
        t.source.utcOffset = 8 * 3600
        let token = t.createSession()["weatherAccessToken"] as? String
        let before = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=1")
        #expect(before.json["cache"] as? String == "miss" && dates(before) == ["2026-11-30"])
        let trip = t.weather(token: token, query: "lat=31.2304&lon=121.4737&start=2026-12-02&end=2026-12-04", path: "/v1/weather/trip")
        #expect(trip.status == 200 && dates(trip) == days(from: "2026-12-02", 3))
        #expect(t.source.calls == 1, "the trip was cut from the outlook")
        t.clock.advance(4 * 60)
        #expect(dates(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=1")) == ["2026-11-30"], "still today there")
        #expect(t.source.calls == 1)

        t.clock.advance(2 * 60)  // 00:01 on 1 December
        let after = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=1")
        #expect(after.json["cache"] as? String == "miss" && dates(after) == ["2026-12-01"])
        #expect(t.source.calls == 2)
        let fortnight = t.weather(token: token, query: "lat=31.2304&lon=121.4737&start=2026-12-01&end=2026-12-15", path: "/v1/weather/trip")
        #expect(fortnight.status == 200 && dates(fortnight) == days(from: "2026-12-01", 15))
        #expect(t.source.calls == 2, "cut from the new outlook")
        // The new outlook keeps the whole TTL (its today ends in 24 h).
        t.clock.advance(9 * 60)
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=3").json["cache"] as? String == "hit")
        #expect(t.source.calls == 2)
    }

    /// A stale copy served after the place's midnight starts at the place's today, both while
    /// the providers fail and while another worker fetches the cell (each answered with
    /// yesterday as `daily[0]` before the row kept its first day's end, migration 0006). Only
    /// the days asked will do: `days=15`, which the 14 days left cannot hold, gets the failure
    /// (a review: 14 entries broke "exactly the days asked"). Trips are cut by their dates from
    /// the copy as stored, and two midnights later two more days are gone.
    @Test func aStaleCopyAfterThePlacesMidnightStartsAtItsToday() throws {
        let t = try TestGateway(configure: { $0.cacheStaleTTL = 4 * 86_400 })
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:50:00Z")!  // 23:50 in Shanghai
        t.source.utcOffset = 8 * 3600
        var token = t.createSession()["weatherAccessToken"] as? String
        func ask(_ query: String, path: String = "/v1/weather") -> TestGateway.Answer {
            t.weather(token: token, query: "lat=31.2304&lon=121.4737&\(query)", path: path)
        }
        #expect(dates(ask("days=2")) == days(from: "2026-11-30", 2))
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let outlookKey = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let stored = try #require(try t.store.cachedWeather(key: outlookKey, now: t.clock.now()))
        #expect(stored.firstDayEndsAt == Timestamp(iso8601: "2026-11-30T16:00:00Z")!.seconds, "kept with the row")

        t.clock.advance(20 * 60)  // 00:10 on 1 December, the providers failing
        t.source.failure = .providerError
        let two = ask("days=2")
        #expect(two.json["cache"] as? String == "stale" && dates(two) == days(from: "2026-12-01", 2))
        let fourteen = ask("days=14")
        #expect(fourteen.json["cache"] as? String == "stale" && dates(fourteen) == days(from: "2026-12-01", 14))
        #expect(fourteen.json["current"] is [String: Any])
        let fifteen = ask("days=15")
        #expect(fifteen.status == 502 && (fifteen.json["error"] as? [String: Any])?["code"] as? String == "provider_error", "\(fifteen.status)")
        let trip = ask("start=2026-12-03&end=2026-12-05", path: "/v1/weather/trip")
        #expect(trip.status == 200 && dates(trip) == days(from: "2026-12-03", 3))
        // A trip is cut by its dates from the copy as stored: one from UTC's today, the place's
        // yesterday, still gets it (a review: dropping the day first made it a 502).
        let fromYesterday = ask("start=2026-11-30&end=2026-12-02", path: "/v1/weather/trip")
        #expect(fromYesterday.status == 200 && fromYesterday.json["cache"] as? String == "stale" && dates(fromYesterday) == days(from: "2026-11-30", 3))

        // Another worker is fetching the cell (it holds the claim): its stale copy, from today.
        t.source.failure = nil
        let calls = t.source.calls
        #expect(try t.store.acquireFetchLock(key: outlookKey, owner: "pid-\(getpid())-other", now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let refreshing = ask("days=3")
        #expect(refreshing.json["cache"] as? String == "stale" && dates(refreshing) == days(from: "2026-12-01", 3))
        let tripMeanwhile = ask("start=2026-11-30&end=2026-12-02", path: "/v1/weather/trip")
        #expect(tripMeanwhile.json["cache"] as? String == "stale" && dates(tripMeanwhile) == days(from: "2026-11-30", 3))
        #expect(t.source.calls == calls, "the other worker's fetch")
        try t.store.releaseFetchLock(key: outlookKey, owner: "pid-\(getpid())-other")

        t.clock.current = Timestamp(iso8601: "2026-12-02T16:30:00Z")!  // 00:30 on 3 December
        t.source.failure = .providerError
        token = t.createSession()["weatherAccessToken"] as? String  // the first one has expired
        let later = ask("days=7")
        #expect(later.json["cache"] as? String == "stale" && dates(later) == days(from: "2026-12-03", 7))
    }

    /// A stored first-day end beyond any real clock (a damaged or hand-edited row) is a copy long
    /// ended or not yet begun, not a trap: `now - end` overflowed for an end near `Int64.min`.
    @Test func aFirstDayEndBeyondAnyClockIsCountedNotTrappedOn() {
        let now = Timestamp(seconds: 1_780_000_000)
        func ended(_ end: Int64?) -> Int {
            WeatherHandler.staleCopy(CachedWeather(body: [], fetchedAt: now, freshUntil: now, firstDayEndsAt: end), now: now).daysEnded
        }
        #expect(ended(.min) == Int(Int32.max))
        #expect(ended(.min + 1) == Int(Int32.max))
        #expect(ended(-1) == 1 + Int(now.seconds + 1) / 86_400)
        #expect(ended(.max) == -1)
        #expect(ended(now.seconds) == 1)
        #expect(ended(now.seconds + 3_600) == 0)
        #expect(ended(now.seconds + 90_001) == -1)
        #expect(ended(nil) == 0)
    }

    /// A copy fetched under a clock since set back by two days: its first day has not begun at
    /// the place, so while the providers fail no forecast is served from it (it would start at
    /// the day after tomorrow); a trip within its dates still is.
    @Test func aStaleCopyWhoseFirstDayHasNotBegunServesNoForecast() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:50:00Z")!  // 23:50 in Shanghai
        t.source.utcOffset = 8 * 3600
        let legacy = t.config.legacyToken
        #expect(dates(t.weather(token: nil, legacy: legacy, query: "lat=31.2304&lon=121.4737&days=2")) == days(from: "2026-11-30", 2))
        t.clock.current = Timestamp(iso8601: "2026-11-28T15:50:00Z")!  // set back two days
        t.source.failure = .providerError
        let forecast = t.weather(token: nil, legacy: legacy, query: "lat=31.2304&lon=121.4737&days=2")
        #expect(forecast.status == 502, "not a forecast from 30 November on 28 November: \(forecast.status)")
        let trip = t.weather(token: nil, legacy: legacy, query: "lat=31.2304&lon=121.4737&start=2026-11-30&end=2026-12-01", path: "/v1/weather/trip")
        #expect(trip.status == 200 && trip.json["cache"] as? String == "stale" && dates(trip) == days(from: "2026-11-30", 2), "\(trip.status)")
    }

    /// While another worker fetches a cell's outlook just after the place's midnight, a forecast
    /// the stale outlook holds only with its ended day (`days=15`) waits for the fresh one and is
    /// cut from it: no provider call of its own (a review found one a cell each midnight). When
    /// that fetch fails (its claim let go, nothing stored), the answer is its failure, still
    /// without a call: the stale outlook, fetched before midnight, is not that fetch's answer.
    @Test(arguments: [true, false])
    func daysFifteenAfterMidnightWaitsForTheOutlookAnotherWorkerFetches(otherStores: Bool) throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:50:00Z")!  // 23:50 in Shanghai
        t.source.utcOffset = 8 * 3600
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=2").status == 200)
        t.clock.advance(20 * 60)  // 00:10 on 1 December
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let outlookKey = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let other = "pid-\(getpid())-other", stamp = t.clock.now(), path = t.config.databasePath
        #expect(try t.store.acquireFetchLock(key: outlookKey, owner: other, now: stamp, until: stamp.adding(seconds: 60)))
        let body = WeatherReport(
            provider: "caiyun", location: point, timezone: "Asia/Shanghai", current: .unknown,
            daily: FakeWeatherSource.days(for: .outlook, now: stamp.adding(seconds: 8 * 3600)), fetchedAt: stamp.iso8601
        ).json
        // The other worker stores its answer a moment later and lets its claim go. On a thread
        // of its own: a block on Dispatch's global queue waited, under `make sanitize`, behind
        // other tests' blocked blocks until the request gave up waiting (504 after 34 s).
        let stored = DispatchSemaphore(value: 0)
        Thread {
            usleep(100_000)
            if let store = try? SQLiteGatewayStore(path: path) {
                if otherStores {
                    try? store.storeWeather(
                        key: outlookKey, body: body, fetchedAt: stamp, freshUntil: stamp.adding(seconds: 600), staleUntil: stamp.adding(seconds: 1200),
                        firstDayEndsAt: nil)
                }
                try? store.releaseFetchLock(key: outlookKey, owner: other)
            }
            stored.signal()
        }.start()
        let fifteen = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15")
        stored.wait()
        guard otherStores else {
            #expect(fifteen.status == 502 && fifteen.errorCode == "provider_error", "\(fifteen.status)")
            #expect(t.source.calls == 1, "no call of its own")
            return
        }
        #expect(fifteen.status == 200 && fifteen.json["cache"] as? String == "hit", "\(fifteen.status)")
        #expect(dates(fifteen) == days(from: "2026-12-01", 15))
        #expect(t.source.calls == 1, "no call of its own")
    }

    /// A forecast row of its own (the provider sends 14 days, so the outlook cannot hold
    /// `days=15`) holds exactly the days asked from its fetch's today: after the place's
    /// midnight it answers no more, stale or while another worker fetches it (that answer is
    /// waited for), where it answered with yesterday as `daily[0]`.
    @Test func aStaleForecastRowOfItsOwnAnswersNoMoreAfterThePlacesMidnight() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:50:00Z")!  // 23:50 in Shanghai
        t.source.utcOffset = 8 * 3600
        t.source.outlookDays = 14
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(dates(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15")) == days(from: "2026-11-30", 15))
        t.clock.advance(20 * 60)  // 00:10 on 1 December
        t.source.failure = .timeout
        let own = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15")
        #expect(own.status == 504, "the failure, not 15 days from yesterday: \(own.status)")
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=7").json["cache"] as? String == "stale", "cut from the outlook")
    }

    /// A request that fetched the cell's outlook first (slowly) and then claims its own row claims
    /// it from the time it claims, not from its arrival: claimed from the arrival after an 8 s
    /// outlook, the claim had run out before its fetch began, so another worker could take the
    /// cell over and call the provider again (a race audit, session 30).
    @Test func aClaimAfterASlowOutlookCountsFromItsOwnStart() throws {
        let t = try TestGateway()
        t.source.outlookDays = 14  // so days=15 needs a row of its own, a second fetch
        let clock = t.clock, db = t.store.db
        var claimLeft: [Int64] = []
        t.source.onFetch = { query in
            switch query {
            case .outlook: clock.advance(8)  // the outlook took 8 s
            default:
                let until = (try? db.scalarInt("SELECT max(expires_at) FROM weather_fetch_locks")) ?? nil
                claimLeft.append((until ?? 0) - clock.now().seconds)
            }
        }
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15").status == 200)
        #expect(t.source.calls == 2)
        let claimSeconds = WeatherHandler.fetchBudget(of: t.source).claimSeconds
        #expect(claimLeft == [claimSeconds], "the own row's claim had \(claimLeft) s left while its fetch ran")
    }

    /// A request's fetches share one fetch's time: after an outlook that took part of it, the
    /// request's own row is fetched in what is left, and after one that took all of it, not at
    /// all (504, or the row's stale copy). Each fetch used to get the providers' full time, so a
    /// request could hold its worker twice as long, past the web server's 15 s with two 4 s
    /// providers (a failure-path audit, session 31). The handler's monotonic clock stands for the
    /// providers' seconds.
    @Test func aRequestsFetchesShareOneFetchsTime() throws {
        let t = try TestGateway()
        t.source.outlookDays = 14  // so days=15 needs a row of its own, a second fetch
        t.source.worstCaseSeconds = 4
        let budget = WeatherHandler.fetchBudget(of: t.source).seconds
        // Frozen but for the provider's seconds: the values given are exact.
        let base = MonotonicTime.now()
        var skew: UInt64 = 0, outlookTakes = 0.6 * budget
        t.gateway.weatherHandler.monotonic = { base + skew }
        t.source.onFetch = { query in
            if case .outlook = query { skew += UInt64(outlookTakes * 1_000_000_000) }
        }
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15").status == 200)
        #expect(t.source.calls == 2 && t.source.given.count == 2)
        #expect(abs(t.source.given[0] - budget) < 1e-6 && abs(t.source.given[1] - (budget - outlookTakes)) < 1e-6, "\(t.source.given)")

        outlookTakes = budget  // another cell's outlook takes all the time
        let spent = t.weather(token: token, query: "lat=39.9042&lon=116.4074&days=15")
        #expect(spent.status == 504 && spent.errorCode == "provider_timeout", "\(spent.status)")
        #expect(t.source.calls == 3 && t.source.given.last == 0, "the row's fetch given no time: \(t.source.given)")
        #expect(t.log.lines.last?.contains(" providers=caiyun:ok,caiyun:out_of_time") == true, "\(t.log.lines.last ?? "")")
        #expect(try t.store.db.scalarInt("SELECT count(*) FROM weather_fetch_locks") == 0)
    }

    /// A wait for another worker's fetch ends at the request's deadline, not a whole fetch's time
    /// after the wait began: after an outlook that took all but 0.3 s of the request's time, the
    /// request waits 0.3 s for the worker fetching its own row, not 5 s more.
    @Test func aWaitEndsAtTheRequestsDeadline() throws {
        let t = try TestGateway()
        t.source.outlookDays = 14
        t.source.worstCaseSeconds = 4
        let budget = WeatherHandler.fetchBudget(of: t.source).seconds
        var skew: UInt64 = 0
        t.gateway.weatherHandler.monotonic = { MonotonicTime.now() + skew }
        t.source.onFetch = { _ in skew += UInt64((budget - 0.3) * 1_000_000_000) }
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let own = point.cacheKeys(.forecast(days: 15)).cache
        #expect(try t.store.acquireFetchLock(key: own, owner: "pid-1", now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let token = t.createSession()["weatherAccessToken"] as? String
        let started = Date()
        let answer = t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15")
        let waited = Date().timeIntervalSince(started)
        #expect(answer.status == 504 && answer.errorCode == "provider_timeout")
        #expect(waited < 2 && waited >= 0.2, "waited \(waited) s: until the deadline, not refused at once nor the whole 5 s")
        #expect(t.source.calls == 1)
    }

    /// A trip within the outlook's reach that the outlook cannot hold because the provider sent
    /// it short, and that no provider is asked for alone (a Caiyun-only gateway, a trip ending
    /// at UTC today+14), is the provider's shortfall: the generic 502, not "do not cover".
    @Test func aTripAShortOutlookCannotHoldIsAProviderError() throws {
        let t = try TestGateway()
        t.source.outlookDays = 14
        t.source.covering = false
        let token = t.createSession()["weatherAccessToken"] as? String
        let trip = t.weather(token: token, query: "lat=31.2304&lon=121.4737&start=2026-12-13&end=2026-12-14", path: "/v1/weather/trip")
        #expect(
            trip.status == 502 && (trip.json["error"] as? [String: Any])?["message"] as? String == HTTPError.providerError.message,
            "\(String(decoding: trip.body, as: UTF8.self))")
        t.source.outlookDays = 15
        t.clock.advance(700)
        let held = t.weather(token: token, query: "lat=31.2304&lon=121.4737&start=2026-12-13&end=2026-12-14", path: "/v1/weather/trip")
        #expect(held.status == 200, "a full outlook holds it")
    }

    /// An answer from a provider whose day has not turned yet (a series from yesterday just
    /// after midnight) is kept for as long as the day has run, a minute at least, not the TTL:
    /// asked again after a minute, then after two, and so on while the provider lags.
    @Test func anAnswerFromAProviderWhoseDayHasNotTurnedIsKeptAsLongAsTheDayHasRun() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T16:00:30Z")!  // 00:00:30 in Shanghai
        t.source.utcOffset = 8 * 3600
        t.source.dayNotTurned = true
        let token = t.createSession()["weatherAccessToken"] as? String
        func cache() -> String? { t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=2").json["cache"] as? String }
        #expect(cache() == "miss")
        t.clock.advance(59)
        #expect(cache() == "hit")
        t.clock.advance(2)  // 00:01:31: fetched again, still lagging: kept 91 s
        #expect(cache() == "miss" && t.source.calls == 2)
        t.clock.advance(90)
        #expect(cache() == "hit")
        t.source.dayNotTurned = false
        t.clock.advance(2)
        #expect(cache() == "miss")
        t.clock.advance(500)
        #expect(cache() == "hit")
        #expect(t.source.calls == 3)
    }

    /// A forecast row of its own (fetched while the outlook could not hold its days, a provider
    /// whose day had not turned) is not kept by the worker: once the outlook holds the days
    /// again, the answer is cut from it, where the kept row answered until its TTL with
    /// yesterday (a race hunt). A request that fetched twice names both fetches in its log line.
    @Test func aForecastRowOfItsOwnGivesWayToAnOutlookThatHoldsItsDays() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T16:30:00Z")!  // 00:30 in Shanghai
        t.source.utcOffset = 8 * 3600
        t.source.dayNotTurned = true
        t.source.outlookDays = 14
        let token = t.createSession()["weatherAccessToken"] as? String
        func ask(_ days: Int) -> TestGateway.Answer { t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=\(days)") }
        #expect(ask(3).json["cache"] as? String == "miss")  // the lagging outlook, fresh until 00:40
        t.clock.advance(590)  // 00:39:50
        let own = ask(15)
        #expect(own.json["cache"] as? String == "miss" && t.source.calls == 2 && t.source.lastQuery == .forecast(days: 15))
        #expect(t.log.lines.last?.contains("providers=caiyun:ok ") == true || t.log.lines.last?.hasSuffix("providers=caiyun:ok") == true)
        t.clock.advance(15)  // 00:40:05: the provider has turned; the outlook is fetched again
        t.source.dayNotTurned = false
        t.source.outlookDays = 15
        let seven = ask(7)
        #expect(seven.json["cache"] as? String == "miss" && t.source.calls == 3)
        t.clock.advance(5)
        let fifteen = ask(15)
        #expect(fifteen.json["cache"] as? String == "hit" && t.source.calls == 3)
        #expect(fifteen.json["fetchedAt"] as? String == seven.json["fetchedAt"] as? String, "cut from the new outlook, not the row fetched at 00:39:50")

        // Fetching both in one request (the outlook and then the days it cannot hold): both named.
        t.clock.advance(700)  // both rows stale
        t.source.outlookDays = 14
        _ = ask(15)
        #expect(t.log.lines.last?.contains("providers=caiyun:ok,caiyun:ok") == true, "\(t.log.lines.last ?? "")")
    }

    /// A forecast row of its own read because the outlook's fetch failed is not kept by the
    /// worker past that request: kept to its own end, it answered with yesterday as `daily[0]`
    /// after the outlook had recovered (a review).
    @Test func anOwnRowReadWhileTheOutlookFailsIsNotKeptPastTheRequest() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-30T16:05:00Z")!  // 00:05 in Shanghai
        t.source.utcOffset = 8 * 3600
        t.source.dayNotTurned = true  // a lagging provider: short answers, kept as long as the day has run
        t.source.outlookDays = 14
        let token = t.createSession()["weatherAccessToken"] as? String
        func ask(_ days: Int) -> TestGateway.Answer { t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=\(days)") }
        #expect(ask(3).json["cache"] as? String == "miss")  // the outlook, fresh until 00:10
        t.clock.advance(240)  // 00:09: days=15 is a row of its own, fresh until 00:18
        #expect(ask(15).json["cache"] as? String == "miss" && t.source.lastQuery == .forecast(days: 15))
        t.clock.advance(120)  // 00:11: the outlook is stale and its fetch fails
        t.source.failure = .providerError
        #expect(ask(15).json["cache"] as? String == "hit", "the row of its own, from the store")
        t.clock.advance(30)  // the provider recovers and has turned its day
        t.source.failure = nil
        t.source.dayNotTurned = false
        t.source.outlookDays = 15
        let recovered = ask(15)
        #expect(recovered.json["cache"] as? String == "miss" && t.source.lastQuery == .outlook, "\(recovered.json["cache"] ?? "")")
        #expect(dates(recovered) == days(from: "2026-12-01", 15))
    }

    /// A provider that always sends fewer days: the forecast's own row is kept in memory while
    /// the outlook it stands in for is fresh (no read of SQLite for each request).
    @Test func aForecastRowOfItsOwnIsKeptWhileTheShortOutlookIsFresh() throws {
        let t = try TestGateway()
        t.source.outlookDays = 14
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15").json["cache"] as? String == "miss")
        try t.store.db.execute("DELETE FROM weather_cache WHERE cache_key LIKE '%|forecast:15'")
        t.clock.advance(60)
        #expect(t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=15").json["cache"] as? String == "hit")
        #expect(t.source.calls == 2)
    }

    /// The end of a forecast's freshness at the place's midnight is put off by 0 to 59 s, never
    /// past the TTL.
    @Test(arguments: [Int64(0), 59])
    func aForecastStopsBeingFreshWithinAMinuteAfterMidnight(spread: Int64) throws {
        let t = try TestGateway()
        t.gateway.weatherHandler.midnightSpread = { spread }
        t.clock.current = Timestamp(iso8601: "2026-11-30T15:59:30Z")!  // 23:59:30 in Shanghai
        t.source.utcOffset = 8 * 3600
        let token = t.createSession()["weatherAccessToken"] as? String
        func cache() -> String? { t.weather(token: token, query: "lat=31.2304&lon=121.4737&days=1").json["cache"] as? String }
        #expect(cache() == "miss")
        t.clock.advance(30 + spread - 1)
        #expect(cache() == "hit", "fresh until midnight + \(spread) s")
        t.clock.advance(1)
        #expect(cache() == "miss")
        #expect(t.source.calls == 2)
    }

    @Test func aTripWithinTheOutlookIsCutFromItWithoutCurrent() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let trip = t.weather(token: token, query: "lat=1&lon=2&start=2026-12-02&end=2026-12-05", path: "/v1/weather/trip")
        #expect(trip.status == 200 && trip.json["cache"] as? String == "miss" && trip.json["current"] == nil)
        #expect(dates(trip) == days(from: "2026-12-02", 4))
        #expect(t.source.lastQuery == .outlook)
        // The forecast of that cell and another trip within it: no call.
        #expect(t.weather(token: token, query: "lat=1&lon=2").json["cache"] as? String == "hit")
        let last = t.weather(token: token, query: "lat=1&lon=2&start=2026-12-10&end=2026-12-14", path: "/v1/weather/trip")
        #expect(last.json["cache"] as? String == "hit" && dates(last) == days(from: "2026-12-10", 5))
        #expect(t.source.calls == 1)
    }

    @Test func whatTheOutlookDoesNotHoldIsFetchedAsAsked() throws {
        let t = try TestGateway()
        t.source.outlookDays = 7  // a provider that sends fewer days than asked
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(dates(t.weather(token: token, query: "lat=1&lon=2&days=7")) == days(from: "2026-11-30", 7))
        #expect(t.source.calls == 1)
        let eight = t.weather(token: token, query: "lat=1&lon=2&days=8")
        #expect(eight.json["cache"] as? String == "miss" && dates(eight) == days(from: "2026-11-30", 8))
        #expect(t.source.lastQuery == .forecast(days: 8) && t.source.calls == 2)
        // A trip from (UTC) yesterday, which the outlook starting today does not hold.
        let trip = t.weather(token: token, query: "lat=1&lon=2&start=2026-11-29&end=2026-12-01", path: "/v1/weather/trip")
        #expect(trip.status == 200 && dates(trip) == days(from: "2026-11-29", 3))
        #expect(t.source.lastQuery == .trip(start: LocalDate("2026-11-29")!, end: LocalDate("2026-12-01")!) && t.source.calls == 3)
        // Each is cached as asked.
        #expect(t.weather(token: token, query: "lat=1&lon=2&days=8").json["cache"] as? String == "hit")
        #expect(t.source.calls == 3)
    }

    /// With the providers failing, a request the outlook cannot hold gets its own stale copy
    /// after one round of calls (the outlook's), not two; and with no outlook at all (a row of
    /// the release before, under `forecast:7`) its own copy rather than 502.
    @Test func failingProvidersServeTheRequestsOwnCopyAfterOneRound() throws {
        let t = try TestGateway()
        t.source.outlookDays = 3
        let token = t.createSession()["weatherAccessToken"] as? String
        let query = "lat=1&lon=2&start=2026-12-05&end=2026-12-06"
        #expect(t.weather(token: token, query: query, path: "/v1/weather/trip").json["cache"] as? String == "miss")
        #expect(t.source.calls == 2)  // the outlook, then the trip as asked
        t.clock.advance(601)
        t.source.failure = .providerError
        let stale = t.weather(token: token, query: query, path: "/v1/weather/trip")
        #expect(stale.status == 200 && stale.json["cache"] as? String == "stale")
        #expect(t.source.calls == 3, "asked the failing providers twice in one request")

        let point = GridPoint.snapping(lat: 40, lon: 116, degrees: t.config.gridDegrees)
        let old = WeatherReport(
            provider: "caiyun", location: point, timezone: "Asia/Shanghai", current: .unknown,
            daily: FakeWeatherSource.days(for: .forecast(days: 7), now: t.clock.now()), fetchedAt: t.clock.now().iso8601)
        try t.store.storeWeather(
            key: "\(point.key)|forecast:7", body: old.json, fetchedAt: t.clock.now(),
            freshUntil: t.clock.now(), staleUntil: t.clock.now().adding(seconds: 3600), firstDayEndsAt: nil)
        let upgraded = t.weather(token: token, query: "lat=40&lon=116")
        #expect(upgraded.status == 200 && upgraded.json["cache"] as? String == "stale" && dates(upgraded)?.count == 7)
    }

    /// A trip from UTC's yesterday uses an outlook only if one is cached: on a cold cell it is
    /// asked for as it is (an outlook would hold that date only west of UTC early in the day).
    @Test func aTripFromYesterdayFetchesNoOutlook() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let trip = t.weather(token: token, query: "lat=1&lon=2&start=2026-11-29&end=2026-11-30", path: "/v1/weather/trip")
        #expect(trip.status == 200 && dates(trip) == days(from: "2026-11-29", 2))
        #expect(t.source.calls == 1 && t.source.lastQuery == .trip(start: LocalDate("2026-11-29")!, end: LocalDate("2026-11-30")!))
    }

    /// A trip from UTC's yesterday while the providers fail: a stale outlook that holds its
    /// dates (fetched when that date was still today there) answers it, as it answers the cell's
    /// forecast (it was 502 with the outlook used only when fresh).
    @Test func aTripFromYesterdayGetsTheStaleOutlookWhenTheProvidersFail() throws {
        let t = try TestGateway()
        t.clock.current = Timestamp(iso8601: "2026-11-29T23:55:00Z")!
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token, query: "lat=1&lon=2").json["cache"] as? String == "miss")  // outlook from 11-29
        t.clock.advance(601)  // 2026-11-30T00:05Z: the outlook is stale, 11-29 is UTC's yesterday
        t.source.failure = .providerError
        let trip = t.weather(token: token, query: "lat=1&lon=2&start=2026-11-29&end=2026-11-30", path: "/v1/weather/trip")
        #expect(trip.status == 200 && trip.json["cache"] as? String == "stale" && dates(trip) == days(from: "2026-11-29", 2))
        #expect(trip.json["current"] == nil)
        #expect(t.source.calls == 2 && t.source.lastQuery == .trip(start: LocalDate("2026-11-29")!, end: LocalDate("2026-11-30")!))
    }

    /// No provider covering the days: 502 saying so, without a call.
    @Test func daysNoProviderCoversAreSaidWithoutACall() throws {
        let t = try TestGateway()
        t.source.covering = false
        let token = t.createSession()["weatherAccessToken"] as? String
        let far = t.weather(token: token, query: "lat=1&lon=2&start=2027-03-01&end=2027-03-02", path: "/v1/weather/trip")
        #expect(far.status == 502 && far.errorCode == "provider_error" && far.headers["retry-after"] == nil)
        #expect(String(decoding: far.body, as: UTF8.self).contains("do not cover the days asked"))
        #expect(t.source.calls == 0)
        #expect(t.log.lines.last?.contains(" providers=caiyun:not_covered") == true, "\(t.log.lines.last ?? "")")
    }
}

@Suite struct WeatherCounterTests {
    @Test func cacheAndProviderCountersArePerHourAndBatched() throws {
        let t = try TestGateway { $0.flushInterval = 60 }
        let token = t.createSession()["weatherAccessToken"] as? String
        _ = t.weather(token: token)  // miss: one provider call
        _ = t.weather(token: token)  // hit
        #expect(try t.store.db.scalarInt("SELECT count(*) FROM weather_counters WHERE name LIKE 'cache.%'") == 0, "nothing written before the flush interval")
        t.clock.advance(601)
        t.source.failure = .providerError
        _ = t.weather(token: token)  // stale: one failed call
        t.clock.advance(60)
        t.gateway.afterResponse()
        let rows = try t.store.db.statement(
            "SELECT name, sum(value) FROM weather_counters WHERE name LIKE 'cache.%' OR name LIKE 'provider.%' GROUP BY name ORDER BY name"
        ).rows { "\($0.text(0)!)=\($0.int(1))" }
        #expect(rows == ["cache.hit=1", "cache.miss=1", "cache.stale=1", "provider.caiyun.calls=2", "provider.caiyun.errors=1"])
        let hours = try t.store.db.statement("SELECT DISTINCT hour FROM weather_counters ORDER BY hour").rows { $0.text(0)! }
        #expect(hours == ["2026-11-30T02"])
    }

    /// The stale copy answered while another worker refreshes the cell is `stale` to the client
    /// but counted apart from the stale answers of failing providers.
    @Test func aStaleCopyWhileAnotherWorkerRefreshesIsCountedApart() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: token).json["cache"] as? String == "miss")
        t.clock.advance(601)  // past the TTL, within the stale window
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        #expect(try t.store.acquireFetchLock(key: key, owner: "another-worker", now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let refreshing = t.weather(token: token)
        #expect(refreshing.status == 200 && refreshing.json["cache"] as? String == "stale")
        #expect(t.log.lines.last?.contains(" cache=stale") == true)
        #expect(t.source.calls == 1, "the worker called the provider although another worker was fetching")
        try t.store.releaseFetchLock(key: key, owner: "another-worker")
        t.source.failure = .providerError
        #expect(t.weather(token: token).json["cache"] as? String == "stale")  // the provider failed
        t.gateway.afterResponse(force: true)
        let rows = try t.store.db.statement("SELECT name, sum(value) FROM weather_counters WHERE name LIKE 'cache.%' GROUP BY name ORDER BY name").rows {
            "\($0.text(0)!)=\($0.int(1))"
        }
        #expect(rows == ["cache.miss=1", "cache.stale=1", "cache.stale_refreshing=1"])
    }

    /// A copy fetched while the clock ran a day ahead is not fresh once the clock is set back:
    /// it is fetched again. It was a `hit`, with a `fetchedAt` ahead and its days starting a day
    /// early, for the whole step plus the TTL (a black-box clock test) — from this worker's own
    /// memory, and from the store for any other worker.
    @Test func aCopyFetchedUnderAClockSinceSetBackIsFetchedAgain() throws {
        let t = try TestGateway { $0.tokenPolicy.accessTTL = 3 * 86_400 }
        let token = t.createSession()["weatherAccessToken"] as? String
        t.clock.advance(86_400)
        #expect(t.weather(token: token).json["cache"] as? String == "miss")
        t.clock.advance(-86_400)
        let back = t.weather(token: token)
        #expect(back.status == 200 && back.json["cache"] as? String == "miss", "\(back.json["cache"] ?? "-") \(back.status)")
        #expect(t.source.calls == 2)
        let other = try TestGateway(workerBeside: t)
        #expect(other.weather(token: token).json["cache"] as? String == "hit", "the copy fetched now is fresh")
        #expect(t.weather(token: token).json["cache"] as? String == "hit")
    }

    /// Another worker stored the cell and let its claim go between this request's cache read and
    /// its claim: the stored answer is used (`hit`), the providers are not called a second time
    /// (a black-box race hunt: 13 double calls in 1,050 bursts of six requests for a new cell).
    @Test func aCellStoredJustBeforeTheClaimIsNotFetchedAgain() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let other = try TestGateway()  // another worker's answer for the cell, as it stores it
        _ = other.weather(token: other.createSession()["weatherAccessToken"] as? String)
        let body = try #require(try other.store.cachedWeather(key: key, now: other.clock.now())).body
        let now = t.clock.now()
        // Cleared at the end: the store keeps the closure, which keeps the gateway and its store
        // (LeakSanitizer found the whole gateway left behind, session 23).
        defer { t.store.beforeFetchClaim = nil }
        t.store.beforeFetchClaim = {
            try? t.store.storeWeather(
                key: key, body: body, fetchedAt: now, freshUntil: now.adding(seconds: 600), staleUntil: now.adding(seconds: 1200), firstDayEndsAt: nil)
        }
        let answer = t.weather(token: token)
        #expect(answer.status == 200 && answer.json["cache"] as? String == "hit", "\(answer.status)")
        #expect(t.source.calls == 0, "the provider was called again")
        #expect(try t.store.fetchLockState(key: key, now: now, until: now.adding(seconds: 60)) == .released)
    }

    /// A claim left by a worker killed mid-fetch does not hold the cell: the next request, with a
    /// stale copy or none, calls the provider at once (it served the stale copy, or waited for
    /// the claim to run out and answered 504).
    @Test func aClaimOfAWorkerKilledMidFetchIsTakenOver() throws {
        let t = try TestGateway()
        let token = t.createSession()["weatherAccessToken"] as? String
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: t.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let dead = FetchLockOwner.make(pid: try endedProcessId())
        #expect(try t.store.acquireFetchLock(key: key, owner: dead, now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let cold = t.weather(token: token)
        #expect(cold.status == 200 && cold.json["cache"] as? String == "miss", "\(cold.status)")
        #expect(t.source.calls == 1)
        #expect(try t.store.fetchLockState(key: key, now: t.clock.now(), until: t.clock.now().adding(seconds: 60)) == .released)

        t.clock.advance(601)  // past the TTL, within the stale window
        #expect(try t.store.acquireFetchLock(key: key, owner: dead, now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let stale = t.weather(token: token)
        #expect(stale.status == 200 && stale.json["cache"] as? String == "miss")
        #expect(t.source.calls == 2)
    }
}

extension WeatherCounterTests {
    /// A clock set back (NTP, an operator's `date`) must not hold the counters until it has
    /// caught up again: the next chance to flush writes them.
    @Test func aClockSetBackDoesNotHoldTheCounters() throws {
        let t = try TestGateway { $0.flushInterval = 60 }
        _ = t.createSession()
        #expect(try t.store.db.scalarInt("SELECT count(*) FROM weather_counters") == 0, "nothing written before the flush interval")
        t.clock.advance(-600)
        t.gateway.afterResponse()
        #expect(try t.store.db.scalarInt("SELECT coalesce(sum(value), 0) FROM weather_counters WHERE name = 'sessions.created'") == 1)
    }
}

/// Workers keep the grants they looked up until any process revokes something (the revocation
/// generation on the shared `-writer` page), so revocation still takes effect at once everywhere.
@Suite struct GrantCacheTests {
    func access(_ s: [String: Any]) -> String? { s["weatherAccessToken"] as? String }
    let minter = TokenMinter(hashKey: [UInt8](repeating: 7, count: 32))

    @Test func aRevokeThroughOneWorkerStopsTheTokenOnAnotherAtOnce() throws {
        let a = try TestGateway()
        let b = try TestGateway(workerBeside: a)
        let s = a.createSession()
        #expect(b.weather(token: access(s)).status == 200, "b now holds the grant")
        #expect(
            a.send("POST", "/v1/weather/session/revoke", body: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": s["refreshToken"]!]).status
                == 204)
        #expect(b.weather(token: access(s)).status == 401)
    }

    @Test func anOperatorRevokeStopsTheTokenOnEveryWorkerAtOnce() throws {
        let a = try TestGateway()
        let s = a.createSession()
        #expect(a.weather(token: access(s)).status == 200)
        // weatherctl's way in: its own connection, wrapped without a worker's set-up.
        let ctl = SQLiteGatewayStore(database: try Database(path: a.config.databasePath))
        #expect(try ctl.revokeSession(id: s["anonymousSessionId"] as! String, now: a.clock.now()))
        #expect(a.weather(token: access(s)).status == 401)
        let other = a.createSession(installationId: "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11")
        #expect(a.weather(token: access(other)).status == 200)
        let hash = try a.store.db.scalarText(
            "SELECT installation_id_hash FROM anonymous_weather_sessions WHERE id = ?1", [.text(other["anonymousSessionId"] as! String)])
        #expect(try ctl.revokeInstallation(hash: hash!, now: a.clock.now()).count == 1)
        #expect(a.weather(token: access(other)).status == 401)
    }

    @Test func aGrantIsReusedUntilTheGenerationMoves() throws {
        let t = try TestGateway()
        let s = t.createSession()
        #expect(t.weather(token: access(s)).status == 200)
        // Behind the gateway's back (no generation move): the worker keeps answering from its copy,
        // which is what saves the lookup, and why operators revoke through weatherctl.
        try t.store.db.execute("UPDATE weather_session_tokens SET revoked_at = '2026-01-01T00:00:00Z'")
        #expect(t.weather(token: access(s)).status == 200)
        t.store.db.noteRevocation()
        #expect(t.weather(token: access(s)).status == 401)
    }

    @Test func aFullGrantCacheMakesRoomForOneAndKeepsTheRest() throws {
        let t = try TestGateway()
        t.store.grantCacheLimit = 4
        let sessions = (0..<6).map { i in t.createSession(installationId: "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d1\(i)") }
        for s in sessions { #expect(t.weather(token: access(s)).status == 200) }
        #expect(t.store.keptGrantCount == 4, "one grant made room for each new one; none were dropped wholesale")
        // The kept ones are still served without SQL: behind the gateway's back, every token is
        // revoked, and exactly the kept grants still answer.
        try t.store.db.execute("UPDATE weather_session_tokens SET revoked_at = '2026-01-01T00:00:00Z'")
        t.store.grantCacheLimit = 100
        let served = sessions.filter { t.weather(token: access($0)).status == 200 }.count
        #expect(served == 4)
    }

    @Test func touchingASessionMovesItsCachedGrant() throws {
        let t = try TestGateway()
        let s = t.createSession()
        #expect(t.weather(token: access(s)).status == 200)
        let key = minter.tokenDigest(try #require(access(s)))
        let kept = try #require(try t.store.accessGrant(token: key))
        let later = kept.lastSeenAt.adding(seconds: 3600)
        try t.store.touchSessions([kept.sessionId: later])
        // Behind the gateway's back the row goes back: only the kept grant can carry the new time.
        try t.store.db.execute("UPDATE anonymous_weather_sessions SET last_seen_at = '2000-01-01T00:00:00Z'")
        #expect(try t.store.accessGrant(token: key)?.lastSeenAt == later)
    }

    @Test func aTokenDigestIsTheTokenHashAsWords() {
        // FIPS 180-2's "abc" vector, and a token-shaped string against the hex form.
        #expect(minter.tokenDigest("abc").hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let token = "wta_" + String(repeating: "x", count: 43)
        #expect(minter.tokenDigest(token).hex == minter.tokenHash(token))
        #expect(minter.tokenDigest(token) == minter.tokenDigest(token))
        #expect(minter.tokenDigest(token).hashValue == minter.tokenDigest(token).hashValue)
        #expect(minter.tokenDigest(token) != minter.tokenDigest("abc"))
    }

    @Test func aCachedGrantStillExpiresOnTime() throws {
        let t = try TestGateway { $0.tokenPolicy.accessTTL = 600 }
        let s = t.createSession()
        #expect(t.weather(token: access(s)).status == 200)
        t.clock.advance(599)
        #expect(t.weather(token: access(s)).status == 200)
        t.clock.advance(1)
        #expect(t.weather(token: access(s)).status == 401)
    }
}

/// A worker waiting for another worker's fetch of the same cell (`WeatherHandler.awaitFetch`).
@Suite struct AwaitFetchTests {
    /// The other worker stores its answer and releases its lock between the waiter's cache read
    /// and its lock check: the waiter reads the cache again and answers the stored body, not 502.
    @Test func aFetchThatEndsBetweenTheTwoChecksIsAHit() throws {
        var stored: [UInt8]?
        var polls = 0
        let body = try WeatherHandler.awaitFetch(
            pollAgain: {
                polls += 1; return polls < 100
            },
            freshBody: { () throws(StoreError) -> [UInt8]? in stored },
            fetchState: { () throws(StoreError) -> FetchLockState in
                stored = Array("{\"ok\":1}".utf8)  // the fetch ended just now, its answer stored
                return .released
            })
        #expect(body == Array("{\"ok\":1}".utf8))
        #expect(polls == 1)
    }

    /// A fetch that let its claim go with nothing stored failed: 502. One whose claim ran out
    /// (its worker was killed, or overran) failed nothing a 502 could name: 504, as when the
    /// waiter's own time is up.
    @Test func aFetchThatEndsWithNothingStoredIs502AndTimeIsUpIs504() {
        #expect(throws: HTTPError(status: 502, code: "provider_error", message: "the weather provider failed; try again later")) {
            try WeatherHandler.awaitFetch(
                pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in .released })
        }
        #expect(throws: HTTPError.providerTimeout) {
            try WeatherHandler.awaitFetch(
                pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in .expired })
        }
        var polls = 0
        #expect(throws: HTTPError(status: 504, code: "provider_timeout", message: "the weather provider did not answer in time")) {
            try WeatherHandler.awaitFetch(
                pollAgain: {
                    polls += 1; return polls <= 3
                }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in .held })
        }
        #expect(polls == 4)
        // A wait with no time at all still reads the cache once: the awaited answer may be there.
        let there = try? WeatherHandler.awaitFetch(
            pollAgain: { false }, freshBody: { () throws(StoreError) -> [UInt8]? in [1] },
            fetchState: { () throws(StoreError) -> FetchLockState in .held })
        #expect(there == [1])
        #expect(throws: HTTPError.storageUnavailable) {
            try WeatherHandler.awaitFetch(
                pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in throw StoreError(code: 10, message: "io") },
                fetchState: { () throws(StoreError) -> FetchLockState in .held })
        }
    }

    /// When the other worker's fetch ends with nothing stored and the providers are then in a
    /// pause, the waiter answers with that failure and its `Retry-After`; a pause while that
    /// fetch still runs (begun by another cell's fetch) does not end the wait.
    @Test func aPauseAfterTheFetchEndedIsTheWaitersAnswer() {
        var paused = HTTPError.providerTimeout
        paused.headers["Retry-After"] = "4"
        var polls = 0, probes = 0
        #expect(throws: paused) {
            try WeatherHandler.awaitFetch(
                pollAgain: {
                    polls += 1; return polls < 100
                },
                freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in
                    probes += 1; return probes == 5 ? .released : .held
                },
                paused: { paused })
        }
        #expect(polls == 5 && probes == 5, "the waiter answered before the fetch it waited for ended")
        #expect(throws: HTTPError.providerError) {
            try WeatherHandler.awaitFetch(
                pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in .released }, paused: { nil })
        }
    }

    /// The other worker's fetch stored an answer that is already not fresh by the waiter's clock
    /// (whole seconds: a TTL of one second, a fetch in the last second before the place's
    /// midnight): the waiter fetches itself (nil), where it answered 502 although the provider
    /// had answered (a black-box drill). A pause still answers first.
    @Test func aFetchWhoseAnswerIsNoLongerFreshIsFetchedAgainNot502() throws {
        let none = try WeatherHandler.awaitFetch(
            pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
            fetchState: { () throws(StoreError) -> FetchLockState in .released },
            fetchedMeanwhile: { () throws(StoreError) -> Bool in true })
        #expect(none == nil)
        #expect(throws: HTTPError.providerTimeout) {
            try WeatherHandler.awaitFetch(
                pollAgain: { true }, freshBody: { () throws(StoreError) -> [UInt8]? in nil },
                fetchState: { () throws(StoreError) -> FetchLockState in .released }, paused: { .providerTimeout },
                fetchedMeanwhile: { () throws(StoreError) -> Bool in true })
        }
    }

    /// The worker fetching the cell was killed mid-fetch: the waiter stops waiting at once (nil:
    /// it fetches itself), after reading the cache once more; it used to wait until the claim
    /// ran out and answer 504.
    @Test func aFetcherThatHasEndedIsNotWaitedFor() throws {
        var polls = 0, probes = 0
        let none = try WeatherHandler.awaitFetch(
            pollAgain: {
                polls += 1; return polls < 100
            },
            freshBody: { () throws(StoreError) -> [UInt8]? in nil },
            fetchState: { () throws(StoreError) -> FetchLockState in
                probes += 1; return probes == 3 ? .abandoned : .held
            })
        #expect(none == nil)
        #expect(polls == 3)
        var stored: [UInt8]?
        let body = try WeatherHandler.awaitFetch(
            pollAgain: { true },
            freshBody: { () throws(StoreError) -> [UInt8]? in stored },
            fetchState: { () throws(StoreError) -> FetchLockState in
                stored = [1]; return .abandoned
            })
        #expect(body == [1], "it had stored its answer before it died")
    }
}

/// The fetch lock as the store keeps it: who holds it, and a claim from a clock stepped back.
@Suite struct FetchLockTests {
    @Test func aClaimIsHeldReleasedOrExpiredAndOneSetUnderAnotherClockCountsAsExpired() throws {
        let t = try TestGateway()
        let now = t.clock.now(), until = now.adding(seconds: 10)
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .released)
        #expect(try t.store.acquireFetchLock(key: "k", owner: "a", now: now, until: until))
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .held)
        #expect(try !t.store.acquireFetchLock(key: "k", owner: "b", now: now, until: until))
        #expect(try t.store.fetchLockState(key: "k", now: now.adding(seconds: 10), until: until) == .expired, "ran out, never let go")
        try t.store.releaseFetchLock(key: "k", owner: "a")
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .released)

        // A claim running out a day ahead: its maker's clock was a day ahead of this one.
        #expect(try t.store.acquireFetchLock(key: "k", owner: "a", now: now.adding(seconds: 86_400), until: until.adding(seconds: 86_400)))
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .expired)
        #expect(try t.store.acquireFetchLock(key: "k", owner: "b", now: now, until: until), "taken over, not waited for")
        // Within a minute of the longest claim it still counts (clocks a little apart).
        #expect(try t.store.acquireFetchLock(key: "j", owner: "a", now: now, until: until.adding(seconds: 60)))
        #expect(try t.store.fetchLockState(key: "j", now: now, until: until) == .held)
    }

    /// A live claim whose worker has ended (killed mid-fetch) is `abandoned` and taken over at
    /// once; a live worker's claim, or an owner that names no process, is not.
    @Test func aClaimOfAProcessThatHasEndedIsTakenOver() throws {
        let t = try TestGateway()
        let now = t.clock.now(), until = now.adding(seconds: 10)
        let ended = try endedProcessId()
        let dead = FetchLockOwner.make(pid: ended)
        #expect(FetchLockOwner.pid(of: dead) == ended)
        #expect(try t.store.acquireFetchLock(key: "k", owner: dead, now: now, until: until))
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .abandoned)
        let me = FetchLockOwner.make(pid: getpid())
        #expect(try t.store.acquireFetchLock(key: "k", owner: me, now: now, until: until), "not taken over")
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .held)
        #expect(try !t.store.acquireFetchLock(key: "k", owner: FetchLockOwner.make(pid: getpid()), now: now, until: until))
        try t.store.releaseFetchLock(key: "k", owner: me)
        #expect(try t.store.fetchLockState(key: "k", now: now, until: until) == .released)

        for owner in ["another-worker", "pid-x-1", "pid-0-1", "pid--5-1", "pid-\(ended)"] {
            #expect(FetchLockOwner.pid(of: owner) == nil, "\(owner)")
            #expect(try t.store.acquireFetchLock(key: owner, owner: owner, now: now, until: until))
            #expect(try t.store.fetchLockState(key: owner, now: now, until: until) == .held, "\(owner)")
            #expect(try !t.store.acquireFetchLock(key: owner, owner: me, now: now, until: until), "\(owner)")
        }
    }

}

/// The production source (the provider chain) with a provider that fails: the worker stops
/// calling it for a pause, answers at once with `Retry-After`, and calls it again afterwards.
@Suite struct ProviderPauseTests {
    /// Answers from a script; counts calls.
    final class ScriptedProvider: WeatherProvider, @unchecked Sendable {
        let name = "caiyun"
        var failure: ProviderFailure? = .httpStatus(503, retryAfter: nil)
        var calls = 0
        /// Runs inside each fetch, before it answers.
        var during: (() -> Void)?
        func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) throws(ProviderFailure) -> WeatherReport {
            calls += 1
            during?()
            if let failure { throw failure }
            return WeatherReport(
                provider: name, location: point, timezone: "UTC", current: nil,
                daily: FakeWeatherSource.days(for: query, now: now), fetchedAt: now.iso8601)
        }
    }

    /// A gateway on the production source with one scripted provider (failing with a 503 until
    /// told otherwise) on the test's clock, and a session's access token.
    func paused(cooldown: Int64) throws -> (ScriptedProvider, TestGateway, String?) {
        let provider = ScriptedProvider()
        let source = ChainWeatherSource(chain: ProviderChain([provider]), timeout: 1, cooldown: cooldown)
        let t = try TestGateway(weather: source)
        source.clock = t.clock
        return (provider, t, t.createSession()["weatherAccessToken"] as? String)
    }

    @Test func aFailingProviderIsNotCalledAgainDuringItsPauseAndTheAnswerSaysWhenToRetry() throws {
        let (provider, t, token) = try paused(cooldown: 30)

        let first = t.weather(token: token)
        #expect(first.status == 502 && first.errorCode == "provider_error")
        #expect(first.headers["retry-after"] == "1")
        #expect(t.log.lines.last?.contains(" providers=caiyun:http_status") == true, "\(t.log.lines.last ?? "")")
        t.clock.advance(1)
        #expect(t.weather(token: token).headers["retry-after"] == "2")  // the second failure in a row
        #expect(provider.calls == 2)

        let skipped = t.weather(token: token, query: "lat=40&lon=116")  // another cell, same pause
        #expect(skipped.status == 502 && skipped.headers["retry-after"] == "2")
        #expect(t.log.lines.last?.contains(" providers=caiyun:cooling_down") == true, "\(t.log.lines.last ?? "")")
        #expect(provider.calls == 2)

        provider.failure = .timeout
        t.clock.advance(2)
        let slow = t.weather(token: token)
        #expect(slow.status == 504 && slow.headers["retry-after"] == "4")
        #expect(t.weather(token: token, query: "lat=40&lon=116").status == 504, "a pause repeats the last failure")
        #expect(provider.calls == 3)

        provider.failure = nil
        t.clock.advance(4)
        let recovered = t.weather(token: token)
        #expect(recovered.status == 200 && recovered.json["cache"] as? String == "miss")
        #expect(recovered.headers["retry-after"] == nil)
        #expect(t.log.lines.last?.contains(" providers=caiyun:ok") == true)
        #expect(provider.calls == 4)
        #expect(t.weather(token: token, query: "lat=40&lon=116").status == 200)
        #expect(provider.calls == 5)
    }

    /// While its providers are paused, a worker answers a cell another worker is fetching at
    /// once, instead of waiting out that fetch (up to timeout × providers + 1 s, then 504).
    @Test func aPausedWorkerDoesNotWaitForAnotherWorkersFetch() throws {
        let (provider, t, token) = try paused(cooldown: 30)
        #expect(t.weather(token: token).status == 502)  // the pause begins

        // Another worker holds the fetch lock of a new cell for the next minute.
        let key = "\(GridPoint.snapping(lat: 40, lon: 116, degrees: t.config.gridDegrees).key)|\(WeatherQuery.outlook.cacheKind)"
        #expect(try t.store.acquireFetchLock(key: key, owner: "another-worker", now: t.clock.now(), until: t.clock.now().adding(seconds: 60)))
        let started = Date()
        let answer = t.weather(token: token, query: "lat=40&lon=116")
        #expect(Date().timeIntervalSince(started) < 0.5, "waited for the other worker's fetch")
        #expect(answer.status == 502 && answer.errorCode == "provider_error" && answer.headers["retry-after"] == "1")
        #expect(t.log.lines.last?.contains(" providers=caiyun:cooling_down") == true)
        #expect(provider.calls == 1)
    }

    /// Two workers wired as in production: pauses on the store's `-writer` page, shared. Each
    /// worker's provider counts its own calls; the sources are on the test's clock.
    func twoWorkers() throws -> (ScriptedProvider, ScriptedProvider, TestGateway, TestGateway, ChainWeatherSource, String?) {
        var sources: [ChainWeatherSource] = []
        func wired(_ provider: ScriptedProvider) -> (SQLiteGatewayStore) -> any WeatherSource {
            { store in
                let source = ChainWeatherSource(chain: ProviderChain([provider]), timeout: 1, cooldown: 30, pauses: store.providerPauses)
                sources.append(source)
                return source
            }
        }
        let p1 = ScriptedProvider(), p2 = ScriptedProvider()
        let t1 = try TestGateway(weatherOn: wired(p1))
        let t2 = try TestGateway(workerBeside: t1, weatherOn: wired(p2))
        for source in sources { source.clock = t1.clock }
        return (p1, p2, t1, t2, sources[0], t1.createSession()["weatherAccessToken"] as? String)
    }

    /// A provider one worker found failing is not called by the next worker either: it answers
    /// at once with the same `Retry-After`, and failures in a row count across workers.
    @Test func aPauseOneWorkerStartsHoldsForTheOthers() throws {
        let (p1, p2, t1, t2, _, token) = try twoWorkers()
        let first = t1.weather(token: token)
        #expect(first.status == 502 && first.headers["retry-after"] == "1")
        let second = t2.weather(token: token)
        #expect(second.status == 502 && second.headers["retry-after"] == "1")
        #expect(t2.log.lines.last?.contains(" providers=caiyun:cooling_down") == true, "\(t2.log.lines.last ?? "")")
        #expect(p1.calls == 1 && p2.calls == 0, "the second worker called the provider the first had just found failing")

        t1.clock.advance(1)
        #expect(t2.weather(token: token).headers["retry-after"] == "2")  // the second failure in a row
        #expect(t1.weather(token: token).headers["retry-after"] == "2")
        #expect(p1.calls == 1 && p2.calls == 1)

        p1.failure = nil
        t1.clock.advance(2)
        #expect(t1.weather(token: token).status == 200)
        // The first worker's success forgot the failures for both: the second worker's next
        // failure is the first in a row again (1 s), not the third (4 s).
        #expect(t2.weather(token: token, query: "lat=40&lon=116").headers["retry-after"] == "1")
        p2.failure = nil
        t1.clock.advance(1)
        #expect(t2.weather(token: token, query: "lat=40&lon=116").status == 200)
        #expect(p1.calls == 2 && p2.calls == 3)
    }

    /// A worker waiting for another worker's fetch of the same cell, when that fetch fails and
    /// pauses the providers, answers with its failure and `Retry-After` (504 after a timeout),
    /// not 502 without either; and within the wait, long before the provider budget (1 s × 1
    /// provider + 1 s here).
    @Test func aWaiterAnswersAsSoonAsTheOtherWorkersFetchFails() throws {
        let (p1, p2, t1, t2, source1, token) = try twoWorkers()
        p1.failure = .timeout
        let point = GridPoint.snapping(lat: 40, lon: 116, degrees: t1.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        #expect(try t1.store.acquireFetchLock(key: key, owner: "pid-1", now: t1.clock.now(), until: t1.clock.now().adding(seconds: 60)))
        // The first worker's fetch, failing while the second worker waits, then its lock
        // released, as `weatherBody` does.
        let now = t1.clock.now()
        nonisolated(unsafe) let otherWorker = (source: source1, store: t1.store)  // that thread's only, until it ends
        let fetching = Thread {
            usleep(100_000)
            _ = otherWorker.source.fetch(.outlook, at: point, now: now, within: .infinity)
            try? otherWorker.store.releaseFetchLock(key: key, owner: "pid-1")
        }
        fetching.start()
        let started = Date()
        let answer = t2.weather(token: token, query: "lat=40&lon=116")
        #expect(Date().timeIntervalSince(started) < 1.5, "waited out the budget")
        #expect(answer.status == 504 && answer.errorCode == "provider_timeout" && answer.headers["retry-after"] == "1")
        #expect(t2.log.lines.last?.contains(" providers=caiyun:cooling_down") == true, "\(t2.log.lines.last ?? "")")
        #expect(p1.calls == 1 && p2.calls == 0)
        while !fetching.isFinished { usleep(1_000) }
    }

    /// The other worker's fetch succeeded, but what it stored is fresh only until the second the
    /// waiter's request came in (a TTL of one second): the waiter fetches the cell itself and
    /// answers 200, where it answered 502 with no provider failing (a black-box drill).
    @Test func aWaiterWhoseAwaitedAnswerIsAlreadyStaleFetchesItself() throws {
        let (p1, p2, t1, t2, _, token) = try twoWorkers()
        p2.failure = nil
        let point = GridPoint.snapping(lat: 40, lon: 116, degrees: t1.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let fetchedAt = t1.clock.now()
        #expect(try t1.store.acquireFetchLock(key: key, owner: "pid-1", now: fetchedAt, until: fetchedAt.adding(seconds: 60)))
        t1.clock.advance(1)  // the waiter's request comes in the next second
        // The first worker's fetch ends while the second waits: its answer stored, fresh until
        // the second the waiter came in, and its lock released, as `weatherBody` does.
        nonisolated(unsafe) let store = t1.store  // that thread's only, until it ends
        let fetching = Thread {
            usleep(100_000)
            try? store.storeWeather(
                key: key, body: Array("{\"provider\":\"caiyun\",\"daily\":[]}".utf8), fetchedAt: fetchedAt,
                freshUntil: fetchedAt.adding(seconds: 1), staleUntil: fetchedAt.adding(seconds: 3600), firstDayEndsAt: nil)
            try? store.releaseFetchLock(key: key, owner: "pid-1")
        }
        fetching.start()
        let answer = t2.weather(token: token, query: "lat=40&lon=116")
        #expect(answer.status == 200 && answer.json["cache"] as? String == "miss", "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
        #expect(p1.calls == 0 && p2.calls == 1)
        while !fetching.isFinished { usleep(1_000) }
    }

    /// A worker whose fetch overran its claim, taken over meanwhile by a worker of another
    /// machine sharing the store (whose pid is the same number), releases only its own claim.
    /// The owner was `pid-N` alone, so the overrunning worker deleted the other's live claim and
    /// a third worker would fetch the cell again.
    @Test func aFetchLockTakenOverByAnotherMachinesWorkerWithTheSamePidIsNotReleased() throws {
        let (provider, t, token) = try paused(cooldown: 30)
        provider.failure = nil
        let point = GridPoint.snapping(lat: 40, lon: 116, degrees: t.config.gridDegrees)
        let key = "\(point.key)|\(WeatherQuery.outlook.cacheKind)"
        let store = t.store, clock = t.clock
        provider.during = {
            clock.advance(3600)  // this worker's claim has run out
            #expect(try! store.acquireFetchLock(key: key, owner: "pid-\(getpid())", now: clock.now(), until: clock.now().adding(seconds: 60)))
        }
        #expect(t.weather(token: token, query: "lat=40&lon=116").status == 200)
        #expect(try t.store.fetchLockState(key: key, now: clock.now(), until: clock.now().adding(seconds: 60)) == .held)
    }

    @Test func noPauseWhenTheCooldownIsOff() throws {
        let (provider, t, token) = try paused(cooldown: 0)
        let first = t.weather(token: token)
        #expect(first.status == 502 && first.headers["retry-after"] == nil)
        #expect(t.weather(token: token).status == 502)
        #expect(provider.calls == 2)
    }
}

/// The id of a process that has run and been reaped.
func endedProcessId() throws -> Int32 {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/true"), nil]
    defer { free(argv[0]) }
    guard posix_spawn(&pid, "/bin/true", nil, nil, &argv, environ) == 0 else { throw StoreError(code: 1, message: "cannot spawn /bin/true") }
    var status: Int32 = 0
    guard waitpid(pid, &status, 0) == pid, kill(pid, 0) == -1, errno == ESRCH else { throw StoreError(code: 1, message: "/bin/true still there") }
    return pid
}
