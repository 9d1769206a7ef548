import Foundation
import WeatherSessionKit

/// A scripted weather gateway behind the ``WeatherHTTPTransport`` seam.
///
/// By default it simulates the contract in API.md: it issues sessions, rotates refresh tokens
/// (a used one is dead; presented again within `retryWindow` it gets the same pair back, later
/// it is a replay that revokes the session), answers weather routes only for live
/// `X-Weather-Session-Token`s, and answers 401 otherwise. Tests replace single routes with `respond(to:with:)` to script
/// failures, and read back every request the kit sent.
final class FakeGateway: WeatherHTTPTransport, @unchecked Sendable {
    enum Route: Hashable, Sendable {
        case createSession, refresh, revoke, weather, trip, unknown
    }
    typealias Responder = @Sendable (WeatherHTTPRequest) async throws -> WeatherHTTPResponse

    static let accessTTL: TimeInterval = .hours(12)
    static let refreshAfter: TimeInterval = .hours(6)
    static let refreshTTL: TimeInterval = .days(30)
    /// `WEATHER_REFRESH_RETRY_WINDOW`'s default.
    static let retryWindow: TimeInterval = 30

    let clock: FakeClock
    let mountPrefix: String

    // @unchecked: everything below is touched only under `lock`.
    private let lock = NSLock()
    private var recorded: [WeatherHTTPRequest] = []
    private var overrides: [Route: Responder] = [:]
    private var serverClockOffset: TimeInterval = 0
    private var issued = 0
    private var accessTokens: [String: (session: String, expiresAt: Date)] = [:]
    private var refreshTokens: [String: (session: String, expiresAt: Date)] = [:]
    /// Spent refresh tokens: when, and the answer they got.
    private var rotated: [String: (session: String, at: Date, answer: WeatherHTTPResponse)] = [:]
    private var lostAnswers: [Route: Int] = [:]
    /// What each refresh came to: `rotated`, `retried`, `refresh_token_reused`, `invalid`.
    private(set) var refreshOutcomes: [String] = []

    init(clock: FakeClock, mountPrefix: String = "/api") {
        self.clock = clock
        self.mountPrefix = mountPrefix
    }

    // MARK: Transport

    func send(_ request: WeatherHTTPRequest) async throws -> WeatherHTTPResponse {
        let route = route(of: request)
        let override = lock.withLock {
            recorded.append(request)
            return overrides[route]
        }
        let response = try await override?(request) ?? simulate(request)
        let lose = lock.withLock { () -> Bool in
            guard let n = lostAnswers[route], n > 0 else { return false }
            lostAnswers[route] = n - 1
            return true
        }
        if lose { throw URLError(.networkConnectionLost) }  // done on the server, never seen by the phone
        return response
    }

    // MARK: Scripting

    /// The next `count` requests to `route` are carried out, but their answers are lost on the way
    /// back (the transport throws `networkConnectionLost`).
    func loseAnswers(to route: Route, count: Int = 1) {
        lock.withLock { lostAnswers[route] = count }
    }

    /// Holds every request to `route` until `gate` opens; the simulation answers it then.
    func hold(_ route: Route, until gate: Gate) {
        // Held weakly: the gateway keeps its overrides, so a strong capture would keep it (and
        // every request it recorded) alive after the test (LeakSanitizer, session 23).
        respond(to: route) { [weak self] request in
            await gate.wait()
            guard let self else { throw URLError(.cancelled) }
            return simulate(request)
        }
    }

    /// Replaces the behaviour of `route`; `nil` restores the simulation.
    func respond(to route: Route, with responder: Responder?) {
        lock.withLock { overrides[route] = responder }
    }

    /// Makes the server's clock differ from the phone's (the phone is wrong by `-offset`).
    func setServerClockOffset(_ offset: TimeInterval) {
        lock.withLock { serverClockOffset = offset }
    }

    /// Kills every access token (as an operator would), leaving refresh tokens alive.
    func invalidateAccessTokens() {
        lock.withLock { accessTokens = [:] }
    }

    /// Kills every token of every session (a revoke, a replay detection).
    func revokeEverything() {
        lock.withLock {
            accessTokens = [:]
            refreshTokens = [:]
            rotated = [:]
        }
    }

    /// `refreshOutcomes`, read under the lock.
    var outcomes: [String] { lock.withLock { refreshOutcomes } }

    var requests: [WeatherHTTPRequest] {
        lock.withLock { recorded }
    }

    func requests(to route: Route) -> [WeatherHTTPRequest] {
        requests.filter { self.route(of: $0) == route }
    }

    func count(_ route: Route) -> Int {
        requests(to: route).count
    }

    /// The JSON object of a request body.
    static func json(_ request: WeatherHTTPRequest) -> [String: String] {
        guard let body = request.body,
            let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        else { return [:] }
        return object.compactMapValues { $0 as? String }
    }

    // MARK: Simulation of the contract

    func route(of request: WeatherHTTPRequest) -> Route {
        let path = request.url.path
        guard path.hasPrefix(mountPrefix + "/") else { return .unknown }
        switch (request.method, String(path.dropFirst(mountPrefix.count))) {
        case ("POST", "/v1/weather/session"): return .createSession
        case ("POST", "/v1/weather/session/refresh"): return .refresh
        case ("POST", "/v1/weather/session/revoke"): return .revoke
        case ("GET", "/v1/weather"): return .weather
        case ("GET", "/v1/weather/trip"): return .trip
        default: return .unknown
        }
    }

    /// What a correct gateway would answer.
    func simulate(_ request: WeatherHTTPRequest) -> WeatherHTTPResponse {
        let body = Self.json(request)
        switch route(of: request) {
        case .createSession:
            guard request.header("Content-Type")?.hasPrefix("application/json") == true else {
                return Self.error(415, "unsupported_media_type")
            }
            guard let id = body["installationId"], UUID(uuidString: id) != nil, body["platform"] == "ios" else {
                return Self.error(400, "invalid_request")
            }
            return lock.withLock {
                issued += 1
                return issuePair(session: "aws_\(issued)", status: 201)
            }

        case .refresh:
            return lock.withLock {
                let token = body["refreshToken"] ?? ""
                if let spent = rotated[token], spent.session == body["anonymousSessionId"] {
                    if serverNow().timeIntervalSince(spent.at) <= Self.retryWindow {
                        refreshOutcomes.append("retried")
                        return spent.answer
                    }
                    refreshOutcomes.append("refresh_token_reused")
                    accessTokens = accessTokens.filter { $0.value.session != spent.session }
                    refreshTokens = refreshTokens.filter { $0.value.session != spent.session }
                    return Self.error(401, "refresh_token_reused")
                }
                guard let entry = refreshTokens[token], entry.session == body["anonymousSessionId"], serverNow() < entry.expiresAt
                else {
                    refreshOutcomes.append("invalid")
                    return Self.error(401, "invalid_refresh_token")
                }
                refreshTokens[token] = nil  // rotation: the presented token is dead now
                let answer = issuePair(session: entry.session, status: 200)
                rotated[token] = (entry.session, serverNow(), answer)
                refreshOutcomes.append("rotated")
                return answer
            }

        case .revoke:
            return lock.withLock {
                guard let token = body["refreshToken"], let entry = refreshTokens[token],
                    entry.session == body["anonymousSessionId"]
                else { return Self.error(401, "invalid_refresh_token") }
                accessTokens = accessTokens.filter { $0.value.session != entry.session }
                refreshTokens = refreshTokens.filter { $0.value.session != entry.session }
                return WeatherHTTPResponse(status: 204)
            }

        case .weather, .trip:
            let live = lock.withLock { () -> Bool in
                guard let token = request.header(WeatherClient.sessionTokenHeader),
                    let entry = accessTokens[token]
                else { return false }
                return serverNow() < entry.expiresAt
            }
            guard live else { return Self.error(401, "unauthorized") }
            let json = route(of: request) == .weather ? Self.weatherJSON : Self.tripJSON
            return WeatherHTTPResponse(
                status: 200, headers: ["Content-Type": "application/json; charset=utf-8"], body: Data(json.utf8))

        case .unknown:
            return Self.error(404, "not_found")
        }
    }

    /// Must be called under `lock`.
    private func issuePair(session: String, status: Int) -> WeatherHTTPResponse {
        issued += 1
        let now = serverNow()
        let access = "wta_\(issued)"
        let refresh = "wtr_\(issued)"
        accessTokens[access] = (session, now + Self.accessTTL)
        refreshTokens[refresh] = (session, now + Self.refreshTTL)
        let response = WeatherSessionResponse(
            anonymousSessionId: session,
            weatherAccessToken: access,
            refreshToken: refresh,
            expiresAt: now + Self.accessTTL,
            refreshAfter: now + Self.refreshAfter,
            expiresIn: Int(Self.accessTTL),
            refreshTokenExpiresAt: now + Self.refreshTTL
        )
        return Self.json(response, status: status)
    }

    /// Must be called under `lock`. Whole seconds, as on the wire.
    private func serverNow() -> Date {
        let now = clock.now() + serverClockOffset
        return Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
    }

    // MARK: Canned answers

    static func json(_ value: some Encodable, status: Int) -> WeatherHTTPResponse {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        return WeatherHTTPResponse(
            status: status,
            headers: [
                "Content-Type": "application/json; charset=utf-8",
                "Cache-Control": "no-store",
            ],
            body: try! encoder.encode(value)
        )
    }

    static func error(_ status: Int, _ code: String, headers: [String: String] = [:]) -> WeatherHTTPResponse {
        var response = json(WeatherErrorEnvelope(code: code, message: "scripted \(code)"), status: status)
        response.headers.merge(headers) { _, new in new }
        return response
    }

    static let weatherJSON = """
        {
          "authMode": "weather_session",
          "provider": "caiyun",
          "location": {"lat": 31.25, "lon": 121.45},
          "timezone": "Asia/Shanghai",
          "current": {
            "observedAt": "2026-11-30T02:00:00Z",
            "temperatureC": 12.3, "apparentTemperatureC": 10.1, "humidity": 0.62,
            "windSpeedKph": 9.4, "precipitationMmPerHour": 0.0, "condition": "cloudy"
          },
          "daily": [
            {"date": "2026-11-30", "temperatureMinC": 8.0, "temperatureMaxC": 14.5,
             "condition": "partly_cloudy", "precipitationProbability": 0.1}
          ],
          "fetchedAt": "2026-11-30T02:03:11Z",
          "cache": "miss"
        }
        """

    static let tripJSON = """
        {
          "authMode": "weather_session",
          "provider": "visualcrossing",
          "location": {"lat": 35.7, "lon": 139.7},
          "timezone": "Asia/Tokyo",
          "daily": [
            {"date": "2026-12-20", "temperatureMinC": 2.0, "temperatureMaxC": 9.5,
             "condition": "clear", "precipitationProbability": 0.0},
            {"date": "2026-12-21", "temperatureMinC": null, "temperatureMaxC": null,
             "condition": "snow", "precipitationProbability": null}
          ],
          "fetchedAt": "2026-11-30T02:03:11Z",
          "cache": "hit"
        }
        """
}

/// A fresh service + client over a fake gateway and a fake clock.
struct Harness {
    static let baseURL = URL(string: "https://weather.example/api")!

    let clock: FakeClock
    let gateway: FakeGateway
    let store: any WeatherSessionStore
    let service: WeatherSessionService
    let client: WeatherClient

    init(
        store: any WeatherSessionStore = InMemoryWeatherSessionStore(), clock: FakeClock = FakeClock(),
        baseURL: URL = Harness.baseURL, refreshRetryInterval: TimeInterval = 60,
        activity: (any WeatherRenewalActivity)? = nil
    ) {
        self.clock = clock
        self.gateway = FakeGateway(clock: clock)
        self.store = store
        self.service = WeatherSessionService(
            baseURL: baseURL, store: store, transport: gateway, clock: clock,
            platform: "ios", appVersion: "1.0", refreshRetryInterval: refreshRetryInterval, activity: activity)
        self.client = WeatherClient(service: service)
    }

    /// A second service on this harness's store, gateway and clock: an app's widget sharing the
    /// Keychain through an access group.
    func widget() -> WeatherSessionService {
        WeatherSessionService(baseURL: Harness.baseURL, store: store, transport: gateway, clock: clock)
    }
}
