import Foundation
import Testing
@testable import WeatherSessionKit
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How a scripted refresh can fail without the session being dead.
enum RefreshFailure: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case networkError, serverError500, storageUnavailable503, webServer503, rateLimited429

    var testDescription: String { rawValue }

    var responder: FakeGateway.Responder {
        switch self {
        case .networkError: return { _ in throw URLError(.notConnectedToInternet) }
        case .serverError500: return { _ in FakeGateway.error(500, "internal_error") }
        case .storageUnavailable503: return { _ in FakeGateway.error(503, "storage_unavailable") }
        case .webServer503: return { _ in FakeGateway.error(503, "service_unavailable") }  // nginx's page
        case .rateLimited429: return { _ in FakeGateway.error(429, "rate_limited", headers: ["Retry-After": "60"]) }
        }
    }
}

@Suite("WeatherSessionService")
struct WeatherSessionServiceTests {
    @Test func firstCallCreatesSessionWithPlatformAppVersionAndInstallationID() async throws {
        let h = Harness()
        let token = try await h.service.accessToken()

        let creates = h.gateway.requests(to: .createSession)
        try #require(creates.count == 1)
        #expect(creates[0].url.absoluteString == "https://weather.example/api/v1/weather/session")
        #expect(creates[0].header("content-type") == "application/json; charset=utf-8")
        let body = FakeGateway.json(creates[0])
        let storedID = try #require(try h.store.loadInstallationID())
        #expect(
            body == [
                "platform": "ios",
                "appVersion": "1.0",
                "installationId": storedID.uuidString.lowercased(),
            ])
        #expect(try h.store.loadSession()?.accessToken == token)
    }

    @Test func storedTokenIsServedWithoutNetworkBeforeRefreshAfter() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(6) - 1)

        #expect(try await h.service.accessToken() == first)
        #expect(h.gateway.requests.count == 1)
    }

    /// Past the hint the stored, still valid token is returned at once and the refresh runs
    /// behind it; the next call gets the rotated token.
    @Test func refreshAfterHintRotatesTokensSendingSessionIdAndRefreshToken() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let created = try #require(try h.store.loadSession())
        h.clock.advance(by: .hours(6) + 1)

        #expect(try await h.service.accessToken() == created.accessToken)
        await h.service.renewalsSettled()
        let token = try await h.service.accessToken()

        #expect(token != created.accessToken)
        let refreshes = h.gateway.requests(to: .refresh)
        try #require(refreshes.count == 1)
        #expect(refreshes[0].url.absoluteString == "https://weather.example/api/v1/weather/session/refresh")
        #expect(
            FakeGateway.json(refreshes[0]) == [
                "anonymousSessionId": created.anonymousSessionId,
                "refreshToken": created.refreshToken,
            ])
        let stored = try #require(try h.store.loadSession())
        #expect(stored.accessToken == token)
        #expect(stored.anonymousSessionId == created.anonymousSessionId)
        #expect(stored.refreshToken != created.refreshToken)
    }

    @Test(arguments: RefreshFailure.allCases)
    func failedRefreshBeforeExpiryKeepsServingTheOldToken(failure: RefreshFailure) async throws {
        let h = Harness()
        let original = try await h.service.accessToken()
        h.gateway.respond(to: .refresh, with: failure.responder)
        h.clock.advance(by: .hours(7))

        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        // A web server's 5xx is sent again after 1, 2, 4 and 8 s (see unansweredRefreshIsRepeated...);
        // a 429 or the gateway's own 5xx is its final word, and a request that never left the
        // device rotated nothing.
        let repeated = failure == .webServer503
        #expect(h.gateway.count(.refresh) == (repeated ? 5 : 1))
        #expect(h.clock.sleeps == (repeated ? [1, 2, 4, 8] : []))
        #expect(try await h.service.accessToken() == original, "still served once the refresh failed")
        #expect(try h.store.loadSession()?.accessToken == original)
    }

    /// A failed refresh is not tried again before the pause: `refreshRetryInterval`, or a 429's
    /// `Retry-After` when that is longer.
    @Test(arguments: [(interval: 60.0, retryAfter: nil as Int?), (interval: 20.0, retryAfter: 600)])
    func failedRefreshIsNotRetriedBeforeThePause(interval: TimeInterval, retryAfter: Int?) async throws {
        let h = Harness(refreshRetryInterval: interval)
        let original = try await h.service.accessToken()
        h.gateway.respond(to: .refresh) { _ in
            retryAfter.map { FakeGateway.error(429, "rate_limited", headers: ["Retry-After": "\($0)"]) } ?? FakeGateway.error(500, "internal_error")
        }
        h.clock.advance(by: .hours(7))
        let began = h.clock.now()
        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        let attempts = h.gateway.count(.refresh)
        #expect(attempts == 1)

        // Counted from when the refresh began.
        let pause = max(interval, TimeInterval(retryAfter ?? 0))
        h.clock.advance(by: pause - 1 - h.clock.now().timeIntervalSince(began))
        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        #expect(h.gateway.count(.refresh) == attempts)

        h.gateway.respond(to: .refresh, with: nil)
        h.clock.advance(by: 2)
        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        #expect(try await h.service.accessToken() != original)
        #expect(h.gateway.count(.refresh) == attempts + 1)
    }

    /// The gateway rotated the tokens but its answer was lost: the kit repeats the very same
    /// request a second later, inside the gateway's retry window, and gets the same pair, instead of
    /// presenting the spent token a minute later as a replay that revokes the session.
    @Test func unansweredRefreshIsRepeatedAtOnceAndKeepsTheSession() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        h.clock.advance(by: .hours(7))
        h.gateway.loseAnswers(to: .refresh)

        #expect(try await h.service.accessToken() == first)
        await h.service.renewalsSettled()
        let token = try await h.service.accessToken()

        #expect(token != first)
        #expect(h.gateway.outcomes == ["rotated", "retried"])
        #expect(h.clock.sleeps == [1])
        let refreshes = h.gateway.requests(to: .refresh)
        #expect(refreshes.count == 2 && refreshes[0] == refreshes[1])
        #expect(try h.store.loadSession()?.anonymousSessionId == session.anonymousSessionId)
        #expect(h.gateway.count(.createSession) == 1)
        // The pair it got back is the live one: the next refresh rotates normally.
        h.clock.advance(by: .hours(7))
        _ = try await h.service.accessToken()
        await h.service.renewalsSettled()
        #expect(h.gateway.outcomes == ["rotated", "retried", "rotated"])
    }

    /// An app and its widget share one store (the Keychain with an access group). The widget
    /// refreshes; the app, still holding the spent refresh token in memory, must not present it:
    /// its own refresh takes the widget's pair from the store instead.
    @Test func processesSharingAStoreDoNotReplayEachOthersRefreshTokens() async throws {
        let app = Harness(), clock = app.clock
        let widget = app.widget()
        let first = try await app.service.accessToken()
        _ = try await widget.accessToken()
        clock.advance(by: .hours(7))
        #expect(try await widget.accessToken() == first)
        await widget.renewalsSettled()
        let widgetToken = try await widget.accessToken()  // rotated; the store holds the new pair
        #expect(widgetToken != first)
        clock.advance(by: 120)

        #expect(try await app.service.accessToken() == first)  // still valid; its refresh starts
        await app.service.renewalsSettled()
        #expect(try await app.service.accessToken() == widgetToken)  // taken from the store, no network
        #expect(app.gateway.outcomes == ["rotated"])
        clock.advance(by: .hours(7))
        _ = try await app.service.accessToken()  // the app's turn: it presents the live token
        await app.service.renewalsSettled()
        #expect(app.gateway.outcomes == ["rotated", "rotated"])
        #expect(app.gateway.count(.createSession) == 1)
    }

    /// The app resets its installation id while its widget, sharing the store, still holds the
    /// old one: the widget's next session is created under the new id, so the app, which then
    /// takes that session from the store, is not tied to the id the reset ended.
    @Test func aWidgetCreatesItsNextSessionUnderTheIDTheAppsResetSaved() async throws {
        let app = Harness(), store = app.store
        let widget = app.widget()
        let first = try await app.service.accessToken()
        #expect(try await widget.accessToken() == first)
        let old = try await widget.installationID()

        try await app.service.revoke(resettingInstallationID: true)
        let new = try #require(try store.loadInstallationID())
        #expect(new != old)
        let widgetToken = try await widget.refreshAccessToken(rejecting: first)  // its 401: revoked
        #expect(try await app.service.accessToken() == widgetToken, "the app takes the widget's session from the store")
        let creates = app.gateway.requests(to: .createSession)
        #expect(creates.map { FakeGateway.json($0)["installationId"] } == [old.uuidString.lowercased(), new.uuidString.lowercased()])
        #expect(try await widget.installationID() == new)
    }

    @Test func expiredTokenForcesRefreshAndThrowsWhenItFails() async throws {
        let h = Harness()
        let original = try await h.service.accessToken()
        h.gateway.respond(to: .refresh, with: RefreshFailure.networkError.responder)
        h.clock.advance(by: .hours(12))

        await #expect(throws: URLError.self) {
            try await h.service.accessToken()
        }
        h.gateway.respond(to: .refresh, with: RefreshFailure.serverError500.responder)
        let error = await #expect(throws: WeatherAPIError.self) {
            try await h.service.accessToken()
        }
        #expect(error?.status == 500)
        // An expired token is never handed out, and there is no retry pause once it expired
        // (one try that never left the device, then one answered with the gateway's own 500).
        #expect(h.gateway.count(.refresh) == 2)

        h.gateway.respond(to: .refresh, with: nil)
        let renewed = try await h.service.accessToken()
        #expect(renewed != original)
        #expect(h.gateway.count(.createSession) == 1)
    }

    /// A 429's `Retry-After` on a renewal that cannot be skipped (creation, a refresh after
    /// expiry) is honoured: until it passes the error comes back, with the seconds left, and the
    /// gateway is not asked again.
    @Test(arguments: [false, true])
    func retryAfterOnARenewalHoldsBackTheNextOne(expiredSession: Bool) async throws {
        let h = Harness()
        let refused: FakeGateway.Responder = { _ in FakeGateway.error(429, WeatherAPIError.Code.rateLimited, headers: ["Retry-After": "120"]) }
        let route: FakeGateway.Route = expiredSession ? .refresh : .createSession
        if expiredSession {
            _ = try await h.service.accessToken()
            h.clock.advance(by: .hours(13))
        }
        h.gateway.respond(to: route, with: refused)

        let first = await #expect(throws: WeatherAPIError.self) { try await h.service.accessToken() }
        #expect(first?.retryAfter == 120)
        h.clock.advance(by: 60)
        let held = await #expect(throws: WeatherAPIError.self) { try await h.service.accessToken() }
        #expect(held?.status == 429 && held?.retryAfter == 60)
        let viaClient = await #expect(throws: WeatherAPIError.self) { try await h.service.refreshAccessToken() }
        #expect(viaClient?.status == 429)
        #expect(h.gateway.count(route) == 1)

        h.gateway.respond(to: route, with: nil)
        h.clock.advance(by: 61)
        _ = try await h.service.accessToken()
        #expect(h.gateway.count(route) == 2)
    }

    /// A refresh's `Retry-After` holds back refreshes only: after "reset app" (revoke) a new
    /// session is created at once, since creation has its own quota.
    @Test func aRefreshsRetryAfterDoesNotHoldBackCreation() async throws {
        let h = Harness()
        let original = try await h.service.accessToken()
        h.gateway.respond(to: .refresh) { _ in FakeGateway.error(429, WeatherAPIError.Code.rateLimited, headers: ["Retry-After": "1800"]) }
        h.clock.advance(by: .hours(7))
        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        #expect(try await h.service.accessToken() == original)  // optional refresh refused, old token kept
        #expect(h.gateway.count(.refresh) == 1)
        try await h.service.revoke()

        let fresh = try await h.service.accessToken()
        #expect(fresh != original)
        #expect(h.gateway.count(.createSession) == 2)
    }

    /// A clock set back to before a refusal ends its hold, instead of stretching it by however
    /// far the clock went back.
    @Test func aClockSetBackEndsAHold() async throws {
        let h = Harness()
        h.gateway.respond(to: .createSession) { _ in FakeGateway.error(429, WeatherAPIError.Code.rateLimited, headers: ["Retry-After": "60"]) }
        await #expect(throws: WeatherAPIError.self) { try await h.service.accessToken() }
        h.gateway.respond(to: .createSession, with: nil)
        h.clock.advance(by: -.hours(24))
        _ = try await h.service.accessToken()
        #expect(h.gateway.count(.createSession) == 2)
    }

    /// Repeats of an unanswered refresh start no later than 20 s after the first went out (each
    /// attempt here takes 15 s to fail: the repeat goes at 16 s, a third would go at 33 s), and
    /// the next try waits for the pause counted from that first attempt or the end of the last.
    @Test func unansweredRefreshRepeatsStayInsideTheGatewaysRetryWindow() async throws {
        let h = Harness(refreshRetryInterval: 20)
        let original = try await h.service.accessToken()
        h.clock.advance(by: .hours(7))
        let start = h.clock.now()
        h.gateway.respond(to: .refresh) { [clock = h.clock] _ in
            clock.advance(by: 15)
            throw URLError(.timedOut)
        }

        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        #expect(h.gateway.count(.refresh) == 2)  // at 0 s and 16 s; not at 33 s
        #expect(h.clock.now() == start + 31)

        h.gateway.respond(to: .refresh, with: nil)
        h.clock.advance(by: 1)  // 32 s after the first attempt: 20 s from it have passed
        #expect(try await h.service.accessToken() == original)
        await h.service.renewalsSettled()
        #expect(try await h.service.accessToken() != original)
        #expect(h.gateway.count(.refresh) == 3)
    }

    /// Deadlines count from when the request went out, not from when its answer arrived (here
    /// 100 s later): a late answer must not leave the app trusting a token past its expiry.
    @Test func deadlinesCountFromWhenTheRequestWentOut() async throws {
        let h = Harness()
        let sentAt = h.clock.now()
        h.gateway.respond(to: .createSession) { [clock = h.clock, weak gateway = h.gateway] request in
            clock.advance(by: 100)
            guard let gateway else { throw URLError(.cancelled) }
            return gateway.simulate(request)
        }
        _ = try await h.service.accessToken()

        let session = try #require(try h.store.loadSession())
        #expect(session.expiresAt == sentAt + FakeGateway.accessTTL)
        #expect(session.refreshAfter == sentAt + FakeGateway.refreshAfter)
    }

    /// The store refuses to save a renewed session (a locked Keychain, a full disk): the new
    /// token is still returned, used from memory, and saved once the store accepts it.
    @Test func aSessionTheStoreCannotSaveIsUsedFromMemoryAndSavedLater() async throws {
        let store = RefusingStore()
        let h = Harness(store: store)

        let token = try await h.service.accessToken()
        #expect(try store.loadSession() == nil)
        #expect(try await h.service.accessToken() == token)
        #expect(h.gateway.count(.createSession) == 1)

        store.refusing = false
        #expect(try await h.service.accessToken() == token)
        #expect(try store.loadSession()?.accessToken == token)
        #expect(h.gateway.requests.count == 1)
    }

    /// A store that cannot delete the dead session (a folder made read-only) does not keep the
    /// app on it: after a revocation the next refresh makes a new session and works from memory.
    /// It threw the store's error on every call, after the same two refused requests.
    @Test func aStoreThatCannotDeleteDoesNotKeepADeadSession() async throws {
        let store = RefusingStore()
        store.refusing = false
        let h = Harness(store: store)
        let first = try await h.service.accessToken()
        store.refusing = true
        store.refusingDeletes = true
        h.gateway.revokeEverything()
        h.clock.advance(by: .hours(7))

        #expect(try await h.service.accessToken() == first)  // not yet known to be dead
        await h.service.renewalsSettled()
        let second = try await h.service.accessToken()
        #expect(second != first)
        #expect(h.gateway.count(.createSession) == 2)
        #expect(try await h.service.accessToken() == second, "used from memory")
        #expect(h.gateway.count(.createSession) == 2)
    }

    @Test func refresh401ClearsSessionAndCreatesNewSessionWithSameInstallationID() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let installationID = try #require(try h.store.loadInstallationID())
        let first = try #require(try h.store.loadSession())
        h.gateway.revokeEverything()
        h.clock.advance(by: .hours(7))

        #expect(try await h.service.accessToken() == first.accessToken)  // not yet known to be dead
        await h.service.renewalsSettled()
        let token = try await h.service.accessToken()

        #expect(h.gateway.count(.refresh) == 1)
        let creates = h.gateway.requests(to: .createSession)
        try #require(creates.count == 2)
        #expect(FakeGateway.json(creates[1])["installationId"] == installationID.uuidString.lowercased())
        #expect(try h.store.loadInstallationID() == installationID)
        let second = try #require(try h.store.loadSession())
        #expect(second.anonymousSessionId != first.anonymousSessionId)
        #expect(second.accessToken == token)
    }

    @Test func refresh401AfterExpiryStillCreatesNewSession() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        h.gateway.respond(to: .refresh) { _ in FakeGateway.error(401, WeatherAPIError.Code.refreshTokenReused) }
        h.clock.advance(by: .hours(13))

        let token = try await h.service.accessToken()

        #expect(h.gateway.count(.refresh) == 1)
        #expect(h.gateway.count(.createSession) == 2)
        #expect(try h.store.loadSession()?.accessToken == token)
    }

    @Test func expiredRefreshTokenCreatesNewSessionWithoutAskingToRefresh() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        h.clock.advance(by: .days(31))

        _ = try await h.service.accessToken()

        #expect(h.gateway.count(.refresh) == 0)
        #expect(h.gateway.count(.createSession) == 2)
    }

    /// Fifty callers past `refreshAfter`, the refresh held open: each is answered at once with
    /// the stored, still valid token, and exactly one refresh goes out; its token is the next.
    @Test func fiftyConcurrentCallersWhenRefreshIsDueMakeExactlyOneRefresh() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(7))

        let gate = Gate()
        let gateway = h.gateway
        gateway.hold(.refresh, until: gate)
        let service = h.service
        let (answered, callers) = try await finishesPromptly {
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<50 { group.addTask { try await service.accessToken() } }
                return try await group.reduce(into: [String]()) { $0.append($1) }
            }
        }
        if !answered { gate.open() }
        #expect(answered, "the callers waited for the refresh")
        while gateway.count(.refresh) == 0 { await Task.yield() }
        for _ in 0..<500 { await Task.yield() }
        #expect(gateway.count(.refresh) == 1)
        gate.open()
        let tokens = try await callers.value
        await service.renewalsSettled()

        #expect(tokens.count == 50)
        #expect(Set(tokens) == [first])
        #expect(gateway.count(.refresh) == 1)
        let stored = try #require(try h.store.loadSession())
        #expect(stored.accessToken != first)
        #expect(try await service.accessToken() == stored.accessToken)
    }

    /// Fifty callers of an expired token all wait for the one refresh, held open until every
    /// caller had the chance to pile up behind it, and all get its token.
    @Test func fiftyConcurrentCallersOfAnExpiredTokenShareOneRefresh() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(13))

        let gate = Gate()
        let gateway = h.gateway
        gateway.hold(.refresh, until: gate)
        let service = h.service
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 {
                group.addTask { try await service.accessToken() }
            }
            group.addTask {
                while gateway.count(.refresh) == 0 { await Task.yield() }
                for _ in 0..<500 { await Task.yield() }
                gate.open()
                return "opener"
            }
            var tokens: [String] = []
            for try await token in group where token != "opener" {
                tokens.append(token)
            }
            return tokens
        }

        #expect(gateway.count(.refresh) == 1)
        let stored = try #require(try h.store.loadSession())
        #expect(stored.accessToken != first)
        #expect(tokens.count == 50)
        #expect(Set(tokens) == [stored.accessToken])
    }

    @Test func fiftyConcurrentFirstCallersShareOneSessionCreation() async throws {
        let h = Harness()
        let gate = Gate()
        let gateway = h.gateway
        gateway.hold(.createSession, until: gate)
        let service = h.service
        let tokens = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<50 {
                group.addTask { try await service.accessToken() }
            }
            group.addTask {
                while gateway.count(.createSession) == 0 { await Task.yield() }
                for _ in 0..<500 { await Task.yield() }
                gate.open()
                return nil
            }
            var tokens: [String] = []
            for try await case let token? in group {
                tokens.append(token)
            }
            return tokens
        }

        #expect(gateway.count(.createSession) == 1)
        #expect(tokens.count == 50)
        #expect(Set(tokens).count == 1)
    }

    @Test(arguments: [-5.0, 5.0])
    func deadlinesFollowExpiresInEvenWhenPhoneClockIsWrong(serverAheadByHours: Double) async throws {
        let h = Harness()
        h.gateway.setServerClockOffset(.hours(serverAheadByHours))
        let receivedAt = h.clock.now()
        let first = try await h.service.accessToken()

        let stored = try #require(try h.store.loadSession())
        #expect(stored.expiresAt == receivedAt + .hours(12))
        #expect(stored.refreshAfter == receivedAt + .hours(6))
        #expect(stored.refreshTokenExpiresAt == receivedAt + .days(30))

        h.clock.advance(by: .hours(6) - 1)
        #expect(try await h.service.accessToken() == first)
        #expect(h.gateway.count(.refresh) == 0)
        h.clock.advance(by: 2)
        #expect(try await h.service.accessToken() == first)
        await h.service.renewalsSettled()
        #expect(try await h.service.accessToken() != first)
        #expect(h.gateway.count(.refresh) == 1)
    }

    @Test func revokeTellsGatewayAndForgetsSessionButKeepsInstallationID() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        let installationID = try h.store.loadInstallationID()

        try await h.service.revoke()

        let revokes = h.gateway.requests(to: .revoke)
        try #require(revokes.count == 1)
        #expect(revokes[0].url.absoluteString == "https://weather.example/api/v1/weather/session/revoke")
        #expect(
            FakeGateway.json(revokes[0]) == [
                "anonymousSessionId": session.anonymousSessionId,
                "refreshToken": session.refreshToken,
            ])
        #expect(try h.store.loadSession() == nil)
        #expect(try h.store.loadInstallationID() == installationID)

        let next = try await h.service.accessToken()
        #expect(next != session.accessToken)
        #expect(h.gateway.count(.createSession) == 2)
    }

    /// Offline or refused, a revocation keeps the session (forgetting its refresh token would
    /// leave the gateway's session alive with nothing left to end it); the next `revoke()` ends it.
    @Test(arguments: [RefreshFailure.networkError, .storageUnavailable503, .webServer503, .rateLimited429])
    func revokeKeepsTheSessionUntilTheGatewayHasEndedIt(failure: RefreshFailure) async throws {
        let h = Harness()
        let token = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        let installationID = try h.store.loadInstallationID()
        h.gateway.respond(to: .revoke, with: failure.responder)

        await #expect(throws: (any Error).self) {
            try await h.service.revoke(resettingInstallationID: true)
        }
        #expect(try h.store.loadSession() == session)
        #expect(try await h.service.accessToken() == token)
        #expect(try await h.client.weather(lat: 1, lon: 1).cache == .miss, "the session still works")
        #expect(h.gateway.count(.refresh) == 0 && h.gateway.count(.createSession) == 1)
        #expect(try h.store.loadInstallationID() == installationID, "not reset while the session lives")

        h.gateway.respond(to: .revoke, with: nil)
        try await h.service.revoke()
        let revokes = h.gateway.requests(to: .revoke)
        #expect(revokes.count == 2 && FakeGateway.json(revokes[1])["refreshToken"] == session.refreshToken)
        #expect(try h.store.loadSession() == nil)
        #expect(try await h.client.weather(lat: 1, lon: 1).cache == .miss)
        #expect(h.gateway.count(.createSession) == 2)
    }

    /// "Reset app": the session ends and the next one is created under a new installation id.
    @Test func revokeResettingTheInstallationIDStartsOverUnderANewID() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let old = try #require(try h.store.loadInstallationID())

        try await h.service.revoke(resettingInstallationID: true)

        let new = try #require(try h.store.loadInstallationID())
        #expect(new != old)
        #expect(try await h.service.installationID() == new)
        _ = try await h.service.accessToken()
        let creates = h.gateway.requests(to: .createSession)
        #expect(creates.map { FakeGateway.json($0)["installationId"] } == [old.uuidString.lowercased(), new.uuidString.lowercased()])
    }

    /// A renewal asked for while a revocation is in flight waits for it: it does not spend the
    /// refresh token being revoked, and afterwards starts a new session.
    @Test func aRenewalDuringARevocationWaitsForIt() async throws {
        let (h, first, gate) = try await sessionWithHeldRevocation()
        let service = h.service, gateway = h.gateway
        async let revoked: Void = service.revoke()
        while gateway.count(.revoke) == 0 { await Task.yield() }
        async let renewed = service.refreshAccessToken(rejecting: first)
        for _ in 0..<200 { await Task.yield() }
        #expect(gateway.count(.refresh) == 0 && gateway.count(.createSession) == 1)
        gate.open()
        try await revoked
        let token = try await renewed

        #expect(token != first)
        #expect(gateway.count(.refresh) == 0, "no refresh with the revoked session's token")
        #expect(gateway.count(.createSession) == 2)
        #expect(gateway.outcomes.isEmpty)
    }

    /// A caller waiting for a revocation before it can renew is released at once when cancelled.
    @Test func aCancelledCallerWaitingForARevocationStopsWaiting() async throws {
        let (h, first, gate) = try await sessionWithHeldRevocation()
        let service = h.service, gateway = h.gateway
        let revoking = Task { try await service.revoke() }
        while gateway.count(.revoke) == 0 { await Task.yield() }
        let (released, waiting) = try await cancelWhileItWaits { _ = try await service.refreshAccessToken(rejecting: first) }
        #expect(released, "the cancelled caller was still waiting for the revocation")
        gate.open()
        #expect(await waiting.value is CancellationError)
        try await revoking.value
        #expect(gateway.count(.createSession) == 1 && gateway.count(.refresh) == 0)
    }

    /// A web server in front that gave up on a busy gateway answers 502/503/504 while the gateway
    /// rotates the tokens anyway: the kit repeats the refresh and gets the pair, where taking the
    /// 5xx as final made its next refresh a replay that revoked the session.
    @Test(arguments: [502, 503, 504])
    func aWebServers5xxOverARotatedRefreshIsRepeatedAndKeepsTheSession(status: Int) async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        h.clock.advance(by: .hours(7))
        let gateway = h.gateway
        let answered = Counter()
        gateway.respond(to: .refresh) { request in
            let answer = gateway.simulate(request)  // the worker goes on and commits
            return answered.next() == 0 ? FakeGateway.error(status, "service_unavailable") : answer
        }

        #expect(try await h.service.accessToken() == first)
        await h.service.renewalsSettled()
        let token = try await h.service.accessToken()

        #expect(token != first)
        #expect(gateway.outcomes == ["rotated", "retried"])
        #expect(try h.store.loadSession()?.anonymousSessionId == session.anonymousSessionId)
        gateway.respond(to: .refresh, with: nil)
        h.clock.advance(by: .hours(7))
        #expect(try await h.service.accessToken() == token)
        await h.service.renewalsSettled()
        #expect(try await h.service.accessToken() != token)
        #expect(gateway.outcomes == ["rotated", "retried", "rotated"])
        #expect(gateway.count(.createSession) == 1)
    }

    /// A short outage (three answers lost in a row) is ridden out by the paced repeats, where
    /// two repeats at once were spent within milliseconds and the next refresh was a replay.
    @Test func pacedRepeatsRideOutAShortOutage() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        h.clock.advance(by: .hours(13))  // expired: the refresh must succeed
        h.gateway.loseAnswers(to: .refresh, count: 3)

        _ = try await h.service.accessToken()

        #expect(h.gateway.outcomes == ["rotated", "retried", "retried", "retried"])
        #expect(h.clock.sleeps == [1, 2, 4])
        #expect(try h.store.loadSession()?.anonymousSessionId == session.anonymousSessionId)
        #expect(h.gateway.count(.createSession) == 1)
    }

    /// The answer is lost, then the network is gone for two tries (switching from Wi-Fi to
    /// cellular): the repeats go on through the failures to connect, since the first try may
    /// have rotated the tokens, and the third repeat gets the pair.
    @Test func repeatsGoOnThroughFailuresToConnectOnceARefreshMayHaveArrived() async throws {
        let h = Harness()
        _ = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        h.clock.advance(by: .hours(13))
        let gateway = h.gateway
        let attempts = Counter()
        gateway.respond(to: .refresh) { request in
            switch attempts.next() {
            case 0:
                _ = gateway.simulate(request)
                throw URLError(.networkConnectionLost)
            case 1, 2: throw URLError(.notConnectedToInternet)
            default: return gateway.simulate(request)
            }
        }

        _ = try await h.service.accessToken()

        #expect(gateway.outcomes == ["rotated", "retried"])
        #expect(h.clock.sleeps == [1, 2, 4])
        #expect(try h.store.loadSession()?.anonymousSessionId == session.anonymousSessionId)
        #expect(gateway.count(.createSession) == 1)
    }

    /// Creation, refresh and revocation each run inside the app's activity (background time on
    /// iOS), from before their request goes out until their answer is in.
    @Test func renewalsAndRevocationsRunInsideTheAppsActivity() async throws {
        let clock = FakeClock()
        let gateway = FakeGateway(clock: clock)
        let activity = RecordingActivity { gateway.requests.count }
        let service = WeatherSessionService(
            baseURL: Harness.baseURL, store: InMemoryWeatherSessionStore(), transport: gateway, clock: clock, activity: activity)

        let first = try await service.accessToken()
        clock.advance(by: .hours(7))
        #expect(try await service.accessToken() == first)
        await service.renewalsSettled()
        #expect(try await service.accessToken() != first)
        try await service.revoke()

        // (begin, end) with the number of requests sent by then: one request inside each.
        #expect(activity.spans == [[0, 1], [1, 2], [2, 3]])
        #expect(gateway.requests.map { gateway.route(of: $0) } == [.createSession, .refresh, .revoke])
    }

    /// Why a caller must renew: its token expired (13 h), or the gateway rejected it
    /// (`refreshAccessToken`, here at 7 h).
    enum MustRenew: String, CaseIterable, Sendable {
        case expired, rejected
    }

    /// A caller that must renew and is cancelled while the renewal it joined is held (a SwiftUI
    /// `.task` whose view went away) is released at once with `CancellationError`; the renewal
    /// goes on and its tokens are kept. (A caller past `refreshAfter` whose token is still valid
    /// does not wait at all: `callersDuringAHeldOptionalRefreshGetTheOldTokenAtOnce`.)
    @Test(arguments: MustRenew.allCases)
    func aCancelledCallerStopsWaitingAndTheRenewalGoesOn(reason: MustRenew) async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(reason == .expired ? 13 : 7))
        let gate = Gate()
        h.gateway.hold(.refresh, until: gate)
        let service = h.service, gateway = h.gateway
        let renew: @Sendable () async throws -> String = {
            reason == .expired ? try await service.accessToken() : try await service.refreshAccessToken(rejecting: first)
        }
        let holder = Task { try await renew() }
        while gateway.count(.refresh) == 0 { await Task.yield() }
        let (released, cancelled) = try await cancelWhileItWaits { _ = try await renew() }
        #expect(released, "the cancelled caller was still waiting for the renewal")
        gate.open()
        #expect(await cancelled.value is CancellationError)
        let token = try await holder.value
        #expect(token != first)
        #expect(try h.store.loadSession()?.accessToken == token)
        #expect(try await service.accessToken() == token)
        #expect(gateway.count(.refresh) == 1)
    }

    /// Past `refreshAfter` with the refresh held open (a slow or failing gateway), a caller is
    /// answered at once with the stored, still valid token; it waited for the refresh and its
    /// repeats, up to 15 s (a review). A caller meanwhile starts no second refresh; once the
    /// refresh is in, its token is served and stored.
    @Test func callersDuringAHeldOptionalRefreshGetTheOldTokenAtOnce() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(7))
        let gate = Gate()
        h.gateway.hold(.refresh, until: gate)
        let service = h.service, gateway = h.gateway

        let (answered, caller) = try await finishesPromptly { try await service.accessToken() }
        if !answered { gate.open() }
        #expect(answered, "the caller waited for the refresh")
        #expect(try await caller.value == first)
        while gateway.count(.refresh) == 0 { await Task.yield() }
        #expect(try await service.accessToken() == first)
        for _ in 0..<200 { await Task.yield() }
        #expect(gateway.count(.refresh) == 1, "a second refresh beside the one held")

        gate.open()
        await service.renewalsSettled()
        let renewed = try await service.accessToken()
        #expect(renewed != first)
        #expect(try h.store.loadSession()?.accessToken == renewed)
        #expect(gateway.count(.refresh) == 1 && gateway.outcomes == ["rotated"])
    }

    /// A refresh that itself ends in `CancellationError` (the transport or the app's activity
    /// gave up) is a failed optional refresh like any other: the current, still valid token is
    /// served, and the next refresh waits `refreshRetryInterval`.
    @Test func aRefreshEndingInCancellationIsAFailedRefresh() async throws {
        let h = Harness()
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(7))
        h.gateway.respond(to: .refresh) { _ in throw CancellationError() }
        #expect(try await h.service.accessToken() == first)
        await h.service.renewalsSettled()
        #expect(h.gateway.count(.refresh) == 1)
        #expect(try await h.service.accessToken() == first)
        await h.service.renewalsSettled()
        #expect(h.gateway.count(.refresh) == 1, "paused after the failure")
    }

    /// An activity that throws without running the renewal (iOS had no background time left)
    /// fails that call only: the next call sends its request and gets a token. The renewal was
    /// never cleared, and every later call threw the old error without a request (a review).
    @Test func aRenewalTheActivityRefusedDoesNotWedgeTheService() async throws {
        let activity = ScriptedActivity()
        let h = Harness(activity: activity)
        let first = try await h.service.accessToken()
        h.clock.advance(by: .hours(13))  // expired: the call must renew
        activity.script(.refuse)

        await #expect(throws: ScriptedActivity.NoTimeLeft.self) { try await h.service.accessToken() }
        #expect(h.gateway.count(.refresh) == 0)
        let renewed = try await h.service.accessToken()
        #expect(renewed != first)
        #expect(h.gateway.count(.refresh) == 1)
        #expect(try h.store.loadSession()?.accessToken == renewed)
    }

    /// A revocation the activity refused (no background time left) leaves the session as it
    /// was: a call that must renew sends its refresh, and `revoke()` can be called again. The
    /// revocation was never cleared: `revoke()` threw the old error for ever, and a renewal waited
    /// for it in a loop at full CPU (a review).
    @Test func aRevocationTheActivityRefusedDoesNotWedgeTheService() async throws {
        let activity = ScriptedActivity()
        let h = Harness(activity: activity)
        let first = try await h.service.accessToken()
        let session = try #require(try h.store.loadSession())
        activity.script(.refuse)

        await #expect(throws: ScriptedActivity.NoTimeLeft.self) { try await h.service.revoke() }
        #expect(h.gateway.count(.revoke) == 0)
        #expect(try h.store.loadSession() == session)
        h.clock.advance(by: .hours(13))  // expired: the call must renew
        let service = h.service
        let (finished, renewing) = try await finishesPromptly { try await service.accessToken() }
        if !finished { renewing.cancel() }
        #expect(finished, "the renewal is still waiting for the refused revocation")
        let renewed = try await renewing.value
        #expect(renewed != first)
        #expect(h.gateway.count(.refresh) == 1)

        try await h.service.revoke()
        #expect(h.gateway.count(.revoke) == 1)
        #expect(try h.store.loadSession() == nil)
    }

    /// A renewal waiting behind `revoke(resettingInstallationID: true)`, and one asked for while
    /// the app's activity is slow to end the revocation, create the next session under the new
    /// installation id: renewals go on only once it is saved. The revocation was cleared inside
    /// the activity and the id saved by the revoking caller after it, so a renewal could get in
    /// between and create the next session under the old id, which the reset promised to end.
    @Test func renewalsBehindAResetRevocationUseTheNewInstallationID() async throws {
        let activity = ScriptedActivity()
        let h = Harness(activity: activity)
        let first = try await h.service.accessToken()
        let old = try #require(try h.store.loadInstallationID())
        let revokeAnswer = Gate(), activityEnd = Gate()
        h.gateway.hold(.revoke, until: revokeAnswer)
        activity.script(.holdEnd(activityEnd))
        let service = h.service, gateway = h.gateway

        let revoking = Task { try await service.revoke(resettingInstallationID: true) }
        while gateway.count(.revoke) == 0 { await Task.yield() }
        let waiting = Task { try await service.refreshAccessToken(rejecting: first) }
        for _ in 0..<200 { await Task.yield() }
        revokeAnswer.open()
        while activity.worksDone < 2 { await Task.yield() }  // the creation's, the revocation's
        let arriving = Task { try await service.accessToken() }
        for _ in 0..<200 { await Task.yield() }
        #expect(gateway.count(.createSession) == 1, "a session was created before the reset")
        activityEnd.open()
        try await revoking.value
        let tokens = [try await waiting.value, try await arriving.value]

        let new = try #require(try h.store.loadInstallationID())
        #expect(new != old)
        #expect(try await service.installationID() == new)
        let creates = gateway.requests(to: .createSession).dropFirst()
        #expect(creates.map { FakeGateway.json($0)["installationId"] } == [new.uuidString.lowercased()])
        #expect(Set(tokens).count == 1 && tokens[0] != first)
        #expect(gateway.count(.refresh) == 0, "no refresh with the revoked session's token")
    }

    /// The same race without an activity, left to the scheduler: a renewal of higher priority
    /// than the revoking caller, waiting behind the revocation, got onto the actor before that
    /// caller saved the new id, and created the next session under the old one (a review: 24 of
    /// 30 resets; 20 to 25 of these 30 rounds with the id saved by the caller).
    @Test func aHigherPriorityRenewalBehindAResetRevocationUsesTheNewInstallationID() async throws {
        var oldIDCreations = 0
        for _ in 0..<30 {
            let (h, first, gate) = try await sessionWithHeldRevocation()
            let service = h.service, gateway = h.gateway
            let old = try #require(try h.store.loadInstallationID()).uuidString.lowercased()
            let reset = Task(priority: .background) { try await service.revoke(resettingInstallationID: true) }
            while gateway.count(.revoke) == 0 { await Task.yield() }
            let renewal = Task(priority: .high) { try await service.refreshAccessToken(rejecting: first) }
            for _ in 0..<200 { await Task.yield() }
            gate.open()
            try await reset.value
            _ = try await renewal.value
            oldIDCreations += gateway.requests(to: .createSession).dropFirst().filter { FakeGateway.json($0)["installationId"] == old }.count
        }
        #expect(oldIDCreations == 0)
    }

    /// A caller that joins a revocation in flight asking for a new installation id gets it; a
    /// failed revocation replaces nothing, and the ask does not outlive it.
    @Test func aResetAskedByACallerJoiningARevocationIsDoneOnlyIfItSucceeds() async throws {
        let (h, _, gate) = try await sessionWithHeldRevocation()
        let service = h.service, gateway = h.gateway
        let old = try #require(try h.store.loadInstallationID())
        let plain = Task { try await service.revoke() }
        while gateway.count(.revoke) == 0 { await Task.yield() }
        let resetting = Task { try await service.revoke(resettingInstallationID: true) }
        for _ in 0..<200 { await Task.yield() }
        gate.open()
        try await plain.value
        try await resetting.value
        #expect(gateway.count(.revoke) == 1)
        let new = try #require(try h.store.loadInstallationID())
        #expect(new != old)

        _ = try await service.accessToken()
        gateway.respond(to: .revoke, with: RefreshFailure.serverError500.responder)
        await #expect(throws: WeatherAPIError.self) { try await service.revoke(resettingInstallationID: true) }
        #expect(try h.store.loadInstallationID() == new)
        gateway.respond(to: .revoke, with: nil)
        try await service.revoke()
        #expect(try h.store.loadInstallationID() == new, "reset by a revocation that did not ask")
        #expect(try h.store.loadSession() == nil)
    }

    /// A harness with a session (its access token) whose revocation the gateway holds until
    /// `gate` opens.
    func sessionWithHeldRevocation() async throws -> (Harness, String, Gate) {
        let h = Harness()
        let first = try await h.service.accessToken()
        let gate = Gate()
        h.gateway.hold(.revoke, until: gate)
        return (h, first, gate)
    }

    /// Starts `call` and tells whether it ended within 2 s (bounded: a call that waits for a gate
    /// the test has not opened would hang the test); the task gives its outcome.
    func finishesPromptly<T: Sendable>(_ call: @escaping @Sendable () async throws -> T) async throws -> (finished: Bool, task: Task<T, any Error>) {
        let finished = Counter()
        let task = Task {
            defer { _ = finished.next() }
            return try await call()
        }
        for _ in 0..<2_000 where finished.value == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        return (finished.value == 1, task)
    }

    /// Starts `call`, cancels it once it has had time to start waiting, and tells whether it ended
    /// within 2 s (bounded: a caller that ignores cancellation waits for a gate the test opens
    /// only afterwards); the task gives what `call` threw.
    func cancelWhileItWaits(_ call: @escaping @Sendable () async throws -> Void) async throws -> (released: Bool, task: Task<(any Error)?, Never>) {
        let finished = Counter()
        let task = Task { () -> (any Error)? in
            defer { _ = finished.next() }
            do { try await call(); return nil } catch { return error }
        }
        for _ in 0..<100 { await Task.yield() }
        task.cancel()
        for _ in 0..<2_000 where finished.value == 0 { try await Task.sleep(nanoseconds: 1_000_000) }
        return (finished.value == 1, task)
    }

    @Test func damagedStoredSessionIsReplacedByNewSession() async throws {
        let store = InMemoryWeatherSessionStore()
        try store.write(Data("{not json".utf8), for: .session)
        let h = Harness(store: store)

        let token = try await h.service.accessToken()

        #expect(h.gateway.count(.createSession) == 1)
        #expect(try store.loadSession()?.accessToken == token)
    }
}

/// A store whose session writes fail while `refusing` is set, as a locked Keychain
/// (`errSecInteractionNotAllowed`) or a full disk would.
final class RefusingStore: WeatherSessionStore, @unchecked Sendable {
    // @unchecked: `refusingNow` is only touched under `lock`; `inner` is thread-safe.
    private let inner = InMemoryWeatherSessionStore()
    private let lock = NSLock()
    private var refusingNow = true

    var refusing: Bool {
        get { lock.withLock { refusingNow } }
        set { lock.withLock { refusingNow = newValue } }
    }

    func read(_ item: WeatherSessionStoreItem) throws -> Data? { try inner.read(item) }

    func write(_ data: Data, for item: WeatherSessionStoreItem) throws {
        if item == .session && refusing { throw WeatherSessionStoreError.keychain(operation: "write", status: -25308) }
        try inner.write(data, for: item)
    }

    /// Deletes fail too while set (a read-only folder).
    var refusingDeletes: Bool {
        get { lock.withLock { refusingDeletesNow } }
        set { lock.withLock { refusingDeletesNow = newValue } }
    }
    private var refusingDeletesNow = false

    func delete(_ item: WeatherSessionStoreItem) throws {
        if item == .session && refusingDeletes { throw WeatherSessionStoreError.fileSystem(operation: "unlink", path: "session", errno: 13) }
        try inner.delete(item)
    }
}

/// A thread-safe count, for responders and tasks that run concurrently with the test.
final class Counter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    /// The count before this call, which adds one.
    func next() -> Int {
        lock.withLock {
            defer { count += 1 }; return count
        }
    }
    var value: Int { lock.withLock { count } }
}

/// Records when each piece of work it runs begins and ends, by `mark()` (a request count).
final class RecordingActivity: WeatherRenewalActivity, @unchecked Sendable {
    // @unchecked: `recorded` is only touched under `lock`.
    private let lock = NSLock()
    private var recorded: [[Int]] = []
    private let mark: @Sendable () -> Int

    init(mark: @escaping @Sendable () -> Int) { self.mark = mark }

    var spans: [[Int]] { lock.withLock { recorded } }

    func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let index = lock.withLock {
            recorded.append([mark()]); return recorded.count - 1
        }
        defer { lock.withLock { recorded[index].append(mark()) } }
        return try await work()
    }
}

/// Runs each renewal and revocation as an app's activity would, except the turns a test
/// scripts: `refuse` throws without running the work (an expiring activity that had no time
/// left), `holdEnd` runs the work but returns only once the gate opens (a system slow to end it).
final class ScriptedActivity: WeatherRenewalActivity, @unchecked Sendable {
    enum Turn {
        case refuse
        case holdEnd(Gate)
    }
    struct NoTimeLeft: Error {}

    // @unchecked: `turns` and `done` are only touched under `lock`.
    private let lock = NSLock()
    private var turns: [Turn] = []
    private var done = 0

    /// How the next runs go, in order; runs after them are not scripted.
    func script(_ next: Turn...) { lock.withLock { turns += next } }

    /// Pieces of work that have returned or thrown.
    var worksDone: Int { lock.withLock { done } }

    func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        let turn = lock.withLock { turns.isEmpty ? nil : turns.removeFirst() }
        if case .refuse = turn { throw NoTimeLeft() }
        let outcome: Result<T, any Error>
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        lock.withLock { done += 1 }
        if case .holdEnd(let gate) = turn { await gate.wait() }
        return try outcome.get()
    }
}
