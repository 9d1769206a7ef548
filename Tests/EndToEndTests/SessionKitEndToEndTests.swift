import Foundation
import Testing
@testable import WeatherSessionKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// WeatherSessionKit against the real gateway: weather-fcgi behind nginx, a real SQLite file,
/// short token lifetimes by configuration, and fake weather providers on loopback.
///
/// The service runs on a hand-moved clock (it computes every deadline from `expiresIn` on its own
/// clock), and its real `URLSessionWeatherTransport` is wrapped in a recorder that can also fail
/// refreshes or lose a refresh response after the server has answered it.
@Suite(.serialized) struct SessionKitEndToEndTests {
    static let lat = 31.2304
    static let lon = 121.4737

    /// Token lifetimes short enough for a test: access 4 s, refresh hint after 1 s.
    /// 20 s tokens, refresh after 5 s: long enough that a loaded CI machine (every suite runs at
    /// once on 2 cores) does not expire a token between two steps of a test, short enough to wait
    /// for a real server-side expiry once.
    static let shortTTLs = ["WEATHER_ACCESS_TOKEN_TTL": "20", "WEATHER_REFRESH_AFTER": "5"]

    // MARK: - (1) creation, then the session header only

    @Test func firstWeatherRequestCreatesSessionThenSendsOnlyTheSessionToken() async throws {
        let g = try Gateway(env: ["CLOSET_WEATHER_PROXY_TOKEN": "legacy-token-0123456789"])
        let client = WeatherClient(service: g.service)

        let report = try await client.weather(lat: Self.lat, lon: Self.lon, days: 2)

        #expect(report.authMode == .weatherSession)
        #expect(report.daily.count == 2)
        let sent = g.transport.exchanges
        try #require(sent.count == 2)
        #expect(sent[0].route == .create && sent[0].status == 201)
        #expect(sent[1].route == .weather && sent[1].status == 200)
        let session = try #require(try g.store.loadSession())
        #expect(sent[1].request.header("X-Weather-Session-Token") == session.accessToken)
        #expect(sent.allSatisfy { $0.request.header("X-Weather-Token") == nil })
        #expect(sent[1].request.url.absoluteString.hasPrefix("http://127.0.0.1:\(g.h.port)/v1/weather?"))

        // The gateway holds the session and (only the hash of) its access token.
        let sid = session.anonymousSessionId
        #expect(g.h.sql("SELECT status || '|' || platform FROM anonymous_weather_sessions WHERE id = '\(sid)'") == "active|ios")
        #expect(g.h.sql("SELECT count(*) FROM anonymous_weather_sessions") == "1")
        #expect(g.h.sql("SELECT token_type FROM weather_session_tokens WHERE token_hash = '\(sha256Hex(session.accessToken))'") == "access")
        #expect(try g.fake.calls().count >= 1)

        // A second call reuses the session: no new creation, no refresh.
        _ = try await client.weather(lat: Self.lat, lon: Self.lon, days: 2)
        #expect(g.transport.count(.create) == 1 && g.transport.count(.refresh) == 0)
    }

    // MARK: - (2) proactive refresh, failing refresh, expiry

    @Test func refreshesAfterHintKeepsOldTokenWhileRefreshFailsAndMustRefreshOnceExpired() async throws {
        let g = try Gateway(env: Self.shortTTLs)
        let client = WeatherClient(service: g.service)

        let first = try await g.service.accessToken()
        let sid = try #require(try g.store.loadSession()).anonymousSessionId
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh'") == "1")

        // Past refreshAfter (5 s of a 20 s token): the still valid token is served at once and the
        // service refreshes behind it; the server rotated.
        g.clock.advance(by: 6)
        #expect(try await g.service.accessToken() == first)
        await g.service.renewalsSettled()
        let second = try await g.service.accessToken()
        #expect(second != first)
        #expect(g.transport.count(.refresh) == 1)
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NOT NULL") == "1")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NULL") == "1")
        #expect(try await client.weather(lat: Self.lat, lon: Self.lon).authMode == .weatherSession)
        #expect(g.transport.lastWeatherToken == second)

        // Refresh due but failing, token still valid: the old token is served and accepted.
        g.transport.failRefreshes = true
        g.clock.advance(by: 6)
        #expect(try await g.service.accessToken() == second)
        await g.service.renewalsSettled()
        #expect(g.transport.count(.refresh) == 2)  // never left the device: not repeated
        #expect(g.transport.exchanges.last?.status == nil)  // the failed attempts never reached the server
        let report = try await client.weather(lat: Self.lat, lon: Self.lon)
        #expect(report.authMode == .weatherSession)
        #expect(g.transport.lastWeatherToken == second)
        #expect(g.transport.count(.refresh) == 2)  // no new attempt during the pause

        // Expired by the local clock. (That the gateway refuses an expired token is shown with
        // an injected clock by `AuthAndWeatherTests.aCachedGrantStillExpiresOnTime` and
        // `SessionTests`; waiting here for the server's real clock cost 15–19 s a run.)
        g.clock.advance(by: 15)
        await #expect(throws: URLError.self) { try await g.service.accessToken() }  // must refresh; no stale token
        #expect(g.transport.count(.refresh) == 3)

        g.transport.failRefreshes = false
        let third = try await g.service.accessToken()
        #expect(third != second && third != first)
        #expect(g.transport.count(.refresh) == 4)
        #expect(try await client.weather(lat: Self.lat, lon: Self.lon).authMode == .weatherSession)
        #expect(g.transport.lastWeatherToken == third)
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh'") == "3")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NULL") == "1")
        #expect(g.h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(sid)'") == "active")
        #expect(g.transport.count(.create) == 1)
    }

    // MARK: - (3) 401 handling

    @Test func unauthorizedWeatherCallTriggersExactlyOneRefreshAndOneRetry() async throws {
        let g = try Gateway()
        let client = WeatherClient(service: g.service)
        _ = try await client.weather(lat: Self.lat, lon: Self.lon)
        let before = try #require(try g.store.loadSession())

        // An operator-side revocation of just this access token.
        let changed = g.sqlWrite(
            "UPDATE weather_session_tokens SET revoked_at = strftime('%Y-%m-%dT%H:%M:%SZ', 'now') WHERE token_hash = '\(sha256Hex(before.accessToken))'; SELECT changes();"
        )
        try #require(changed == "1")
        g.transport.reset()

        let report = try await client.weather(lat: Self.lat, lon: Self.lon)

        #expect(report.authMode == .weatherSession)
        #expect(g.transport.exchanges.map(\.route) == [.weather, .refresh, .weather])
        #expect(g.transport.exchanges.map(\.status) == [401, 200, 200])
        let after = try #require(try g.store.loadSession())
        #expect(after.anonymousSessionId == before.anonymousSessionId)
        #expect(after.accessToken != before.accessToken)
        #expect(g.transport.exchanges[0].request.header(WeatherClient.sessionTokenHeader) == before.accessToken)
        #expect(g.transport.exchanges[2].request.header(WeatherClient.sessionTokenHeader) == after.accessToken)
        let sid = after.anonymousSessionId
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NOT NULL") == "1")
        #expect(g.h.sql("SELECT count(*) FROM anonymous_weather_sessions") == "1")
    }

    @Test func unauthorizedRefreshClearsTheSessionAndCreatesANewOneForTheSameInstallation() async throws {
        let g = try Gateway()
        let client = WeatherClient(service: g.service)
        _ = try await client.weather(lat: Self.lat, lon: Self.lon)
        let old = try #require(try g.store.loadSession())
        let installation = try await g.service.installationID()

        // The whole session revoked behind the client's back.
        let revoke = try g.h.request(
            "POST", "/v1/weather/session/revoke",
            json: ["anonymousSessionId": old.anonymousSessionId, "refreshToken": old.refreshToken])
        try #require(revoke.status == 204)
        g.transport.reset()

        let report = try await client.weather(lat: Self.lat, lon: Self.lon)

        #expect(report.authMode == .weatherSession)
        #expect(g.transport.exchanges.map(\.route) == [.weather, .refresh, .create, .weather])
        #expect(g.transport.exchanges.map(\.status) == [401, 401, 201, 200])
        let new = try #require(try g.store.loadSession())
        #expect(new.anonymousSessionId != old.anonymousSessionId)
        #expect(try await g.service.installationID() == installation)
        #expect(try g.store.loadInstallationID() == installation)
        #expect(g.h.sql("SELECT count(*) FROM anonymous_weather_sessions") == "2")
        #expect(g.h.sql("SELECT count(DISTINCT installation_id_hash) FROM anonymous_weather_sessions") == "1")
        #expect(g.h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(old.anonymousSessionId)'") == "revoked")
        #expect(g.h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(new.anonymousSessionId)'") == "active")
    }

    // MARK: - (4) one refresh for many callers

    /// Past the hint, fifty callers are answered at once with the still valid token, and one
    /// refresh goes out behind them.
    @Test func fiftyConcurrentAccessTokenCallsWhenRefreshIsDueMakeExactlyOneRefresh() async throws {
        let g = try Gateway(env: Self.shortTTLs)
        let original = try await g.service.accessToken()
        let sid = try #require(try g.store.loadSession()).anonymousSessionId
        g.clock.advance(by: 6)

        let service = g.service
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await service.accessToken() } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        await service.renewalsSettled()

        #expect(tokens.count == 50)
        #expect(Set(tokens) == [original])
        #expect(try await service.accessToken() != original)
        #expect(g.transport.count(.refresh) == 1)
        #expect(g.transport.count(.create) == 1)
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh'") == "2")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NOT NULL") == "1")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'access'") == "2")
        #expect(try await WeatherClient(service: service).weather(lat: Self.lat, lon: Self.lon).authMode == .weatherSession)
    }

    // MARK: - (5) a refresh answered by the server but lost on the way back

    @Test func lostRefreshResponseIsRetriedWithTheSameRefreshTokenAndGetsTheSameSuccessor() async throws {
        let g = try Gateway(env: Self.shortTTLs)
        let original = try await g.service.accessToken()
        let created = try #require(try g.store.loadSession())
        let sid = created.anonymousSessionId

        g.transport.loseNextRefreshResponse = true
        g.clock.advance(by: 6)
        // The server rotated and the answer was lost; the kit sends the very same request again
        // at once, which presents the already rotated refresh token inside the retry window.
        #expect(try await g.service.accessToken() == original)
        await g.service.renewalsSettled()
        let renewed = try await g.service.accessToken()
        let lost = try #require(g.transport.lostResponses.first)
        #expect(lost.status == 200)
        let lostBody = try JSONDecoder().decode(LostPair.self, from: lost.body)
        #expect(lostBody.weatherAccessToken != original)

        let refreshes = g.transport.exchanges.filter { $0.route == .refresh }
        try #require(refreshes.count == 2)
        #expect(refreshes.map(\.status) == [200, 200])
        #expect(refreshes[0].request.body == refreshes[1].request.body)
        #expect(refreshTokenSent(in: refreshes[1].request) == created.refreshToken)
        #expect(renewed == lostBody.weatherAccessToken)
        #expect(try g.store.loadSession()?.refreshToken == lostBody.refreshToken)
        #expect(try await WeatherClient(service: g.service).weather(lat: Self.lat, lon: Self.lon).authMode == .weatherSession)
        #expect(g.transport.lastWeatherToken == renewed)
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh'") == "2")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(sid)' AND token_type = 'refresh' AND revoked_at IS NULL") == "1")
        #expect(g.h.sql("SELECT count(*) FROM weather_session_tokens WHERE token_hash = '\(sha256Hex(lostBody.refreshToken))' AND revoked_at IS NULL") == "1")
        #expect(g.h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(sid)'") == "active")

        // And the successor refreshes normally later on.
        g.clock.advance(by: 6)
        #expect(try await g.service.accessToken() == renewed)
        await g.service.renewalsSettled()
        let next = try await g.service.accessToken()
        #expect(next != renewed)
        #expect(g.h.sql("SELECT status FROM anonymous_weather_sessions WHERE id = '\(sid)'") == "active")
    }

    // MARK: - (6) the installation id

    @Test func installationIDIsARandomV4UUIDThatPersistsAcrossServiceInstancesInAFileStore() async throws {
        let g = try Gateway()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-kit-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = URL(string: "http://127.0.0.1:\(g.h.port)")!

        let firstStore = FileWeatherSessionStore(directory: directory)
        let firstTransport = RecordingTransport()
        let first = WeatherSessionService(baseURL: base, store: firstStore, transport: firstTransport, clock: g.clock)
        let token = try await first.accessToken()
        let id = try await first.installationID()

        // Random version 4, RFC 9562 variant; stored lowercase, mode 0600.
        let text = id.uuidString.lowercased()
        let chars = Array(text)
        #expect(chars[14] == "4")
        #expect("89ab".contains(chars[19]))
        let file = firstStore.fileURL(for: .installationID)
        #expect(try String(contentsOf: file, encoding: .utf8) == text)
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        let createBody = try #require(firstTransport.exchanges.first { $0.route == .create }?.request.body)
        let sentID = try JSONSerialization.jsonObject(with: createBody) as? [String: Any]
        #expect(sentID?["installationId"] as? String == text)

        // A new service over the same directory: same id, same session, no network.
        let secondTransport = RecordingTransport()
        let second = WeatherSessionService(
            baseURL: base, store: FileWeatherSessionStore(directory: directory), transport: secondTransport, clock: g.clock)
        #expect(try await second.installationID() == id)
        #expect(try await second.accessToken() == token)
        #expect(secondTransport.exchanges.isEmpty)
        #expect(try await WeatherClient(service: second).weather(lat: Self.lat, lon: Self.lon).authMode == .weatherSession)

        // After revoking, the next session is for the same installation.
        try await second.revoke()
        let third = WeatherSessionService(
            baseURL: base, store: FileWeatherSessionStore(directory: directory), transport: RecordingTransport(), clock: g.clock)
        #expect(try await third.accessToken() != token)
        #expect(try await third.installationID() == id)
        #expect(g.h.sql("SELECT count(*) FROM anonymous_weather_sessions") == "2")
        #expect(g.h.sql("SELECT count(DISTINCT installation_id_hash) FROM anonymous_weather_sessions") == "1")

        // Another directory is another installation, with another random id.
        let otherDirectory = directory.appendingPathComponent("other")
        let other = WeatherSessionService(
            baseURL: base, store: FileWeatherSessionStore(directory: otherDirectory), transport: RecordingTransport(), clock: g.clock)
        _ = try await other.accessToken()
        let otherID = try await other.installationID()
        #expect(otherID != id)
        #expect(Array(otherID.uuidString)[14] == "4")
        #expect(g.h.sql("SELECT count(DISTINCT installation_id_hash) FROM anonymous_weather_sessions") == "2")
    }
}

// MARK: - Support

/// One gateway, its fake providers, and a service on a manual clock over a recording transport.
private final class Gateway {
    let fake: FakeProviders
    let h: GatewayHarness
    let clock = ManualClock()
    let transport = RecordingTransport()
    let store = InMemoryWeatherSessionStore()
    let service: WeatherSessionService

    init(env: [String: String] = [:], refreshRetryInterval: TimeInterval = 60) throws {
        fake = try FakeProviders()
        h = try GatewayHarness(workers: 2, env: fake.environment().merging(env) { $1 })
        h.companions.append(fake)
        service = WeatherSessionService(
            baseURL: URL(string: "http://127.0.0.1:\(h.port)")!, store: store, transport: transport, clock: clock,
            platform: "ios", appVersion: "1.0-e2e", refreshRetryInterval: refreshRetryInterval)
    }

    /// `sqlite3` with a busy timeout, for writes while the workers have the file open.
    func sqlWrite(_ query: String) -> String {
        ChildProcessOutput.run("/usr/bin/sqlite3", ["-cmd", ".timeout 5000", h.databasePath, query])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// A settable clock: the service's deadlines move only when the test says so.
private final class ManualClock: WeatherClock, @unchecked Sendable {
    // @unchecked: `current` is only touched under `lock`.
    private let lock = NSLock()
    private var current = Date()

    func now() -> Date { lock.withLock { current } }
    func advance(by seconds: TimeInterval) { lock.withLock { current += seconds } }
    /// The kit's pauses between repeats take no real time: the clock moves on instead.
    func sleep(for seconds: TimeInterval) async throws { advance(by: seconds) }
}

/// The real `URLSessionWeatherTransport`, recording every exchange; it can fail refreshes before
/// they are sent, or send one and then lose the answer.
private final class RecordingTransport: WeatherHTTPTransport, @unchecked Sendable {
    enum Route: Equatable { case create, refresh, revoke, weather, other }

    struct Exchange {
        var route: Route
        var request: WeatherHTTPRequest
        /// `nil` when no answer reached the caller's side of the wrapper.
        var status: Int?
    }

    // @unchecked: all mutable state is behind `lock`.
    private let lock = NSLock()
    private let base = URLSessionWeatherTransport(timeout: 10)
    private var log: [Exchange] = []
    private var failing = false
    private var loseNext = false
    private var lost: [WeatherHTTPResponse] = []

    var exchanges: [Exchange] { lock.withLock { log } }
    var lostResponses: [WeatherHTTPResponse] { lock.withLock { lost } }
    var failRefreshes: Bool {
        get { lock.withLock { failing } }
        set { lock.withLock { failing = newValue } }
    }
    var loseNextRefreshResponse: Bool {
        get { lock.withLock { loseNext } }
        set { lock.withLock { loseNext = newValue } }
    }

    func count(_ route: Route) -> Int { exchanges.filter { $0.route == route }.count }
    func reset() { lock.withLock { log.removeAll() } }
    var lastWeatherToken: String? {
        exchanges.last { $0.route == .weather }?.request.header(WeatherClient.sessionTokenHeader)
    }

    static func route(of request: WeatherHTTPRequest) -> Route {
        switch (request.method, request.url.path) {
        case ("POST", "/v1/weather/session"): return .create
        case ("POST", "/v1/weather/session/refresh"): return .refresh
        case ("POST", "/v1/weather/session/revoke"): return .revoke
        case ("GET", "/v1/weather"), ("GET", "/v1/weather/trip"): return .weather
        default: return .other
        }
    }

    func send(_ request: WeatherHTTPRequest) async throws -> WeatherHTTPResponse {
        let route = Self.route(of: request)
        let (index, fail, lose) = begin(request, route: route)
        if fail { throw URLError(.notConnectedToInternet) }
        let response = try await base.send(request)
        finish(index, response: response, lose: lose)
        if lose { throw URLError(.networkConnectionLost) }
        return response
    }

    private func begin(_ request: WeatherHTTPRequest, route: Route) -> (Int, Bool, Bool) {
        lock.withLock {
            log.append(Exchange(route: route, request: request, status: nil))
            let fail = route == .refresh && failing
            let lose = route == .refresh && !fail && loseNext
            if lose { loseNext = false }
            return (log.count - 1, fail, lose)
        }
    }

    private func finish(_ index: Int, response: WeatherHTTPResponse, lose: Bool) {
        lock.withLock {
            // The recorded status is what the server said, even when the caller never sees it.
            if index < log.count { log[index].status = response.status }
            if lose { lost.append(response) }
        }
    }
}

/// The token pair in a refresh answer the client never received.
private struct LostPair: Decodable {
    var weatherAccessToken: String
    var refreshToken: String
}

private func refreshTokenSent(in request: WeatherHTTPRequest) -> String? {
    guard let body = request.body, let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] else { return nil }
    return object["refreshToken"] as? String
}
