import Foundation
import Testing
import WeatherSessionKit

@Suite("WeatherClient")
struct WeatherClientTests {
    @Test func firstWeatherRequestCreatesSessionThenSendsSessionTokenHeader() async throws {
        let h = Harness()

        let report = try await h.client.weather(lat: 31.2304, lon: 121.4737, days: 3)

        let requests = h.gateway.requests
        try #require(requests.count == 2)
        #expect(h.gateway.route(of: requests[0]) == .createSession)
        #expect(requests[1].method == "GET")
        #expect(
            requests[1].url.absoluteString
                == "https://weather.example/api/v1/weather?lat=31.23&lon=121.47&days=3")
        let token = try #require(try h.store.loadSession()?.accessToken)
        #expect(requests[1].header("X-Weather-Session-Token") == token)
        for request in requests {
            #expect(request.header("X-Weather-Token") == nil)
        }
        #expect(report.authMode == .weatherSession)
        #expect(report.current?.temperatureC == 12.3)
    }

    @Test func weather401TriggersExactlyOneRefreshAndOneRetry() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: 31.23, lon: 121.47)
        let before = try #require(try h.store.loadSession())
        h.gateway.invalidateAccessTokens()  // e.g. an operator action; refresh token still alive

        let report = try await h.client.weather(lat: 31.23, lon: 121.47)

        #expect(report.provider == "caiyun")
        #expect(h.gateway.count(.refresh) == 1)
        let weatherCalls = h.gateway.requests(to: .weather)
        try #require(weatherCalls.count == 3)
        #expect(weatherCalls[1].header(WeatherClient.sessionTokenHeader) == before.accessToken)
        let after = try #require(try h.store.loadSession())
        #expect(weatherCalls[2].header(WeatherClient.sessionTokenHeader) == after.accessToken)
        #expect(after.accessToken != before.accessToken)
    }

    @Test func second401OnRetrySurfacesAsErrorWithoutLooping() async throws {
        let h = Harness()
        h.gateway.respond(to: .weather) { _ in FakeGateway.error(401, WeatherAPIError.Code.unauthorized) }

        let error = await #expect(throws: WeatherAPIError.self) {
            try await h.client.weather(lat: 31.23, lon: 121.47)
        }

        #expect(error?.status == 401)
        #expect(error?.code == WeatherAPIError.Code.unauthorized)
        #expect(h.gateway.count(.weather) == 2)
        #expect(h.gateway.count(.refresh) == 1)
    }

    @Test func concurrent401sForTheSameTokenShareOneRefresh() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: 31.23, lon: 121.47)
        h.gateway.invalidateAccessTokens()
        // The renewal is held until all ten callers have met their 401, so each of them finds
        // it under way (without the gate they could run one after another and never share).
        let gate = Gate()
        let gateway = h.gateway
        gateway.hold(.refresh, until: gate)

        let client = h.client
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<10 {
                group.addTask { _ = try await client.weather(lat: 31.23, lon: 121.47) }
            }
            var spins = 0
            while (gateway.count(.weather) < 11 || gateway.count(.refresh) < 1) && spins < 1_000_000 { spins += 1; await Task.yield() }
            #expect(gateway.count(.weather) == 11, "the warm-up and ten 401s")
            #expect(gateway.count(.refresh) == 1)
            gate.open()
            try await group.waitForAll()
        }

        #expect(h.gateway.count(.refresh) == 1)
        #expect(h.gateway.count(.weather) == 21, "each caller asked again once, with the new token")
    }

    @Test func refresh401DuringRetryCreatesNewSessionAndSucceeds() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: 31.23, lon: 121.47)
        h.gateway.revokeEverything()

        let report = try await h.client.weather(lat: 31.23, lon: 121.47)

        #expect(report.cache == .miss)
        #expect(h.gateway.count(.refresh) == 1)
        #expect(h.gateway.count(.createSession) == 2)
    }

    @Test func tripSendsDatesAndDecodesDaysWithoutCurrent() async throws {
        let h = Harness()
        let start = try #require(CalendarDate("2026-12-20"))
        let end = try #require(CalendarDate(year: 2026, month: 12, day: 21))

        let trip = try await h.client.trip(lat: 35.6812, lon: 139.7671, start: start, end: end)

        let request = try #require(h.gateway.requests(to: .trip).first)
        #expect(
            request.url.absoluteString
                == "https://weather.example/api/v1/weather/trip?lat=35.68&lon=139.77&start=2026-12-20&end=2026-12-21")
        #expect(trip.current == nil)
        #expect(trip.daily.map(\.date) == [start, end])
        #expect(trip.daily[1].temperatureMaxC == nil)
        #expect(trip.daily[1].precipitationProbability == nil)
        #expect(trip.daily[1].condition == .snow)
        #expect(trip.cache == .hit)
    }

    @Test func rateLimitedAnswerSurfacesAsWeatherAPIErrorWithRetryAfter() async throws {
        let h = Harness()
        h.gateway.respond(to: .weather) { _ in
            FakeGateway.error(429, WeatherAPIError.Code.rateLimited, headers: ["Retry-After": "120"])
        }

        let error = await #expect(throws: WeatherAPIError.self) {
            try await h.client.weather(lat: 31.23, lon: 121.47)
        }

        #expect(error == WeatherAPIError(status: 429, code: "rate_limited", message: "scripted rate_limited", retryAfter: 120))
        #expect(h.gateway.count(.weather) == 1)
        #expect(h.gateway.count(.refresh) == 0)
    }

    @Test func errorWithoutEnvelopeStillSurfacesItsStatus() async throws {
        let h = Harness()
        h.gateway.respond(to: .weather) { _ in
            WeatherHTTPResponse(status: 502, headers: ["Content-Type": "text/html"], body: Data("<h1>Bad Gateway</h1>".utf8))
        }

        let error = await #expect(throws: WeatherAPIError.self) {
            try await h.client.weather(lat: 31.23, lon: 121.47)
        }

        #expect(error?.status == 502)
        #expect(error?.code == WeatherAPIError.Code.unexpectedResponse)
    }

    @Test func invalidRequestEnvelopeCarriesCodeAndMessage() async throws {
        let h = Harness()
        h.gateway.respond(to: .weather) { _ in
            FakeGateway.json(WeatherErrorEnvelope(code: "invalid_request", message: "lat must be in [-90, 90]"), status: 400)
        }

        let error = await #expect(throws: WeatherAPIError.self) {
            try await h.client.weather(lat: 91, lon: 0)
        }

        #expect(error == WeatherAPIError(status: 400, code: "invalid_request", message: "lat must be in [-90, 90]"))
    }

    @Test(arguments: ["https://weather.example/api", "https://weather.example/api/"])
    func mountPrefixOfBaseURLIsKept(base: String) async throws {
        let h = Harness(baseURL: try #require(URL(string: base)))

        _ = try await h.client.weather(lat: 1, lon: 2)

        #expect(h.gateway.requests.map(\.url.path) == ["/api/v1/weather/session", "/api/v1/weather"])
    }

    @Test func coordinatesAreSentAsPlainDecimalsWithoutExponent() async throws {
        let h = Harness()

        _ = try await h.client.weather(lat: 0.00001, lon: -122.5)

        let request = try #require(h.gateway.requests(to: .weather).first)
        #expect(request.url.query == "lat=0&lon=-122.5")
    }

    /// Two decimals leave the phone unless the app asks for more (a gateway with a finer grid).
    @Test func coordinatesAreRoundedToTheConfiguredDecimals() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: -33.86785, lon: 151.20732)
        _ = try await WeatherClient(service: h.service, coordinateDecimals: 4).weather(lat: -33.86785, lon: 151.20732)
        _ = try await WeatherClient(service: h.service, coordinateDecimals: 0).weather(lat: -0.4, lon: 151.5)
        #expect(
            h.gateway.requests(to: .weather).map { $0.url.query ?? "" }
                == ["lat=-33.87&lon=151.21", "lat=-33.8679&lon=151.2073", "lat=0&lon=152"])
    }

    /// A caller cancelled while it waited for a renewal sends no weather request of its own; the
    /// renewal itself still completes and its tokens are kept.
    @Test func cancelledCallerSendsNothingAfterTheRenewal() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: 1, lon: 1)
        h.clock.advance(by: .hours(13))
        let gate = Gate()
        let gateway = h.gateway
        gateway.hold(.refresh, until: gate)
        let client = h.client
        let task = Task { try await client.weather(lat: 1, lon: 1) }
        while gateway.count(.refresh) == 0 { await Task.yield() }
        task.cancel()
        gate.open()
        let result = await task.result
        #expect(throws: CancellationError.self) { try result.get() }
        #expect(gateway.count(.weather) == 1)
        #expect(gateway.outcomes == ["rotated"])
        // The renewal's pair was kept: the next call needs no network for its token.
        _ = try await h.service.accessToken()
        #expect(gateway.count(.refresh) == 1 && gateway.count(.createSession) == 1)
    }

    /// Nothing a debugger, `dump` or a logging transport prints holds a token, the installation
    /// id or the query's coordinates; `dump(service)` (or of a client) shows only the gateway root.
    @Test func printedValuesHoldNoSecret() async throws {
        let h = Harness()
        _ = try await h.client.weather(lat: 31.2304, lon: 121.4737)
        let session = try #require(try h.store.loadSession())
        let installation = try #require(try h.store.loadInstallationID()).uuidString.lowercased()
        let response = WeatherSessionResponse(
            anonymousSessionId: session.anonymousSessionId, weatherAccessToken: session.accessToken,
            refreshToken: session.refreshToken, expiresAt: session.expiresAt, refreshAfter: session.refreshAfter,
            expiresIn: 43_200, refreshTokenExpiresAt: session.refreshTokenExpiresAt)
        var printed = [String(describing: session), String(reflecting: session), String(describing: response)]
        for value in [session, response, h.gateway.requests[0], h.gateway.requests[1], h.service, h.client] as [Any] {
            var dumped = ""
            dump(value, to: &dumped)
            printed.append(dumped)
        }
        printed += h.gateway.requests.map { String(describing: $0) }
        for text in printed {
            #expect(!text.contains(session.accessToken) && !text.contains(session.refreshToken), "\(text)")
            #expect(!text.lowercased().contains(installation) && !text.contains("31.23"), "\(text)")
        }
        #expect(printed.contains { $0.contains(session.anonymousSessionId) })
        var service = ""
        dump(h.service, to: &service)
        #expect(service.contains(Harness.baseURL.absoluteString), "\(service)")
    }
}
