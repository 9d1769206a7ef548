import Foundation

/// Owns the app's anonymous weather session: creates it, keeps it, refreshes it, revokes it.
///
/// ``accessToken()`` is the whole interface most code needs; ``WeatherClient`` calls it for you.
///
/// ```swift
/// let service = WeatherSessionService(
///     baseURL: URL(string: "https://example.com/api")!,      // mount prefix allowed
///     store: KeychainWeatherSessionStore(service: "com.example.closet.weather-session"),
///     appVersion: "1.4"
/// )
/// let client = WeatherClient(service: service)
/// let forecast = try await client.weather(lat: 31.2304, lon: 121.4737, days: 3)
///
/// // "Reset app" / privacy request:
/// try await service.revoke()
/// ```
///
/// ## Token lifecycle
/// What ``accessToken()`` does, by the local clock (see ``WeatherSession`` for why local):
/// - **no session**: creates one (`POST /v1/weather/session`) with the installation id;
/// - **before `refreshAfter`**: returns the stored token, no network;
/// - **between `refreshAfter` and `expiresAt`**: refreshes. If that fails (offline, 5xx, 429)
///   the stored token is still good, so it is returned, and the refresh is not attempted again
///   for `refreshRetryInterval` (or a 429's `Retry-After`, if longer) so a failing server is not
///   hit on every call;
/// - **after `expiresAt`**: must refresh; if that fails, the error is thrown;
/// - **refresh answered 401** (refresh token expired, revoked, or replayed): the stored session
///   is dropped, the installation id is kept, and a new session is created. Same when the
///   refresh token is known to have expired locally, without asking.
/// - **refresh with no answer** (the connection failed after the request may have gone out):
///   the very same request is sent again at once, up to twice, while less than
///   ``unansweredRefreshWindow`` (20 s) has passed since the first went out. The gateway may
///   already have rotated the tokens; only a repeat within its retry window
///   (`WEATHER_REFRESH_RETRY_WINDOW`, 30 s by default) gets the new pair back instead of being
///   taken for a replay that revokes the session. For the same reason the pause after a failed
///   optional refresh (`refreshRetryInterval`, 20 s by default) counts from when that refresh
///   began, not from when its last attempt gave up.
/// - **`Retry-After`** on a failed creation or refresh (429, or a 503 that sends one): until it
///   has passed, that kind of request is not sent again; a renewal that needs it (no session,
///   an expired token, a 401 from a weather call) throws the same error, with the seconds left.
///   Creation and refresh are held apart (their quotas differ: per address, per session), and
///   revoking or dropping the session ends a refresh's hold.
///
/// Deadlines count from when the creating or refreshing request went out (the first attempt,
/// for a repeated refresh): the gateway issued the tokens after that, so they are never late
/// locally, even when the answer arrives long after (a suspended app, a slow network).
///
/// If the store cannot save a renewed session (the Keychain refuses while the device is locked,
/// the disk is full), the new tokens are used from memory and the save is tried again on each
/// later call: the refresh happened on the gateway, so throwing would lose nothing but the
/// caller's answer.
///
/// ## One renewal at a time
/// Refresh tokens rotate: each can be used once. If two callers refreshed with the same token,
/// the second would present a dead token, and outside the server's short idempotency window
/// that counts as replay and revokes the session, logging the user out. So the actor keeps the
/// one renewal (refresh or creation) in flight as a stored `Task`, and every caller that needs
/// a renewal while it runs awaits that same task. The task is never cancelled by a caller going
/// away: a refresh abandoned after the server rotated the tokens would lose them.
///
/// ## Storage
/// The installation id is a random version-4 UUID created on first use and kept in the
/// ``WeatherSessionStore``; it is not a hardware or advertising id. The session is kept in the
/// same store as a separate item, so dropping a session never changes the installation id.
/// A damaged stored session is discarded (a new session is created); a damaged installation id
/// is replaced by a new random one.
///
/// Sharing a store with an app extension (a widget, a background task): each renewal first
/// re-reads the stored session, and uses it if another process has renewed it meanwhile, so a
/// process never presents a refresh token the other has already spent. Two processes renewing
/// in the very same moment can still collide; the loser's session is then replaced by a new
/// one. Within one process, use one service per store.
public actor WeatherSessionService {
    /// The gateway root and transport, shared with ``WeatherClient``.
    nonisolated let connection: WeatherGatewayConnection
    private let store: any WeatherSessionStore
    private let clock: any WeatherClock
    private let platform: String
    private let appVersion: String?
    private let refreshRetryInterval: TimeInterval

    /// The session as last read from or written to the store; valid once `sessionLoaded`.
    private var session: WeatherSession?
    private var sessionLoaded = false
    private var cachedInstallationID: UUID?
    /// The renewal every caller joins; cleared by the renewal itself when it ends.
    private var renewal: Task<WeatherSession, any Error>?
    /// After a failed optional refresh, no new attempt before this time (the token still works).
    private var refreshPausedUntil: Date?
    /// A creation or a refresh answered with `Retry-After`, held back until it has passed.
    private var holds: [RenewalKind: Hold] = [:]
    /// `session` is newer than the store's copy: saving it failed and is tried again.
    private var sessionUnsaved = false

    /// Creates a service. Nothing touches the store or the network until the first call.
    /// - Parameters:
    ///   - baseURL: the gateway root, `http(s)://host[/mount-prefix]`; routes are appended to it.
    ///   - store: where the installation id and session live; ``KeychainWeatherSessionStore`` in
    ///     an app.
    ///   - transport: how requests are sent; ``URLSessionWeatherTransport`` by default.
    ///   - clock: the time source for all deadlines; the system clock by default.
    ///   - platform: sent on creation; must be on the gateway's allow-list (`ios`, `android`).
    ///   - appVersion: sent on creation, at most 32 printable ASCII characters (for example
    ///     `CFBundleShortVersionString`); `nil` to omit it.
    ///   - refreshRetryInterval: seconds to wait after a failed refresh before trying again while
    ///     the current token is still valid (a 429's `Retry-After` wins when longer). Keep it
    ///     below the gateway's `WEATHER_REFRESH_RETRY_WINDOW` (30 s by default), so that a refresh
    ///     whose answer was lost is repeated while the gateway still recognises it.
    public init(
        baseURL: URL,
        store: any WeatherSessionStore,
        transport: any WeatherHTTPTransport = URLSessionWeatherTransport(),
        clock: any WeatherClock = SystemWeatherClock(),
        platform: String = "ios",
        appVersion: String? = nil,
        refreshRetryInterval: TimeInterval = 20
    ) {
        if let appVersion {
            precondition(
                appVersion.count <= 32 && appVersion.unicodeScalars.allSatisfy { (0x20...0x7e).contains($0.value) },
                "appVersion must be at most 32 printable ASCII characters; the gateway rejects others"
            )
        }
        precondition(refreshRetryInterval >= 0, "refreshRetryInterval must not be negative")
        self.connection = WeatherGatewayConnection(baseURL: baseURL, transport: transport)
        self.store = store
        self.clock = clock
        self.platform = platform
        self.appVersion = appVersion
        self.refreshRetryInterval = refreshRetryInterval
    }

    /// The gateway root this service talks to.
    public nonisolated var baseURL: URL { connection.baseURL }

    /// A usable access token for `X-Weather-Session-Token`, creating or refreshing the session as
    /// needed (see "Token lifecycle" above).
    ///
    /// - Throws: ``WeatherAPIError`` when the gateway refused (for example 429 on creation), the
    ///   transport's error when it could not be reached and no valid token is stored, or
    ///   ``WeatherSessionStoreError`` when the store failed.
    public func accessToken() async throws -> String {
        let now = clock.now()
        saveIfUnsaved()
        guard let current = try loadedSession() else {
            return try await renew(from: nil).accessToken
        }
        if now < current.refreshAfter {
            return current.accessToken
        }
        if now >= current.expiresAt {
            return try await renew(from: current).accessToken
        }
        if let refreshPausedUntil, now < refreshPausedUntil {
            return current.accessToken
        }

        // Optional refresh: the current token is still valid, so a failure is not fatal.
        do {
            return try await renew(from: current).accessToken
        } catch {
            let later = clock.now()
            guard session == current, later < current.expiresAt else {
                // The session was dropped (the refresh got 401) or the token died meanwhile.
                throw error
            }
            // The next try presents the same refresh token; counted from when this one began,
            // it reaches a gateway that may have rotated without our hearing while that gateway
            // still takes it for a repeat (its retry window), not for a replay.
            let retryAfter = (error as? WeatherAPIError)?.retryAfter.map(TimeInterval.init) ?? 0
            refreshPausedUntil = max(now.addingTimeInterval(refreshRetryInterval), later.addingTimeInterval(retryAfter))
            return current.accessToken
        }
    }

    /// A new access token, for a caller whose request was just answered 401.
    ///
    /// Pass the token that was rejected: if the session has already moved on to another token
    /// (a concurrent caller renewed it), that token is returned without a network call, so a
    /// burst of 401s costs one refresh, not one each. Without it, a refresh always happens (or is
    /// joined, when one is in flight). Failure is thrown: there is no valid token to fall back on.
    public func refreshAccessToken(rejecting rejectedToken: String? = nil) async throws -> String {
        saveIfUnsaved()
        let current = try loadedSession()
        if let rejectedToken, let current, current.accessToken != rejectedToken, renewal == nil {
            return current.accessToken
        }
        return try await renew(from: current).accessToken
    }

    /// Revokes the session on the gateway (`POST /v1/weather/session/revoke`) and forgets it.
    ///
    /// The local session is forgotten first and in every case, because the user asked for it;
    /// an error is still thrown when the gateway could not be told (offline, 5xx), so the app can
    /// say so. The server-side session then simply expires. A 401 means the session was already
    /// dead and counts as success. The installation id is kept. The next ``accessToken()``
    /// creates a new session.
    public func revoke() async throws {
        // Let a renewal in flight finish first, so its new tokens are the ones revoked rather
        // than written back after the revoke. Its outcome does not matter here.
        while let pending = renewal {
            _ = await pending.result
        }
        guard let current = try loadedSession() else { return }
        refreshPausedUntil = nil
        try discardSession()

        let response = try await connection.post(
            "/v1/weather/session/revoke", json: SessionTokenRequest(current))
        guard response.isSuccess || response.status == 401 else {
            throw WeatherAPIError(response: response)
        }
    }

    /// The installation id: a random version-4 UUID, created and stored on first use.
    ///
    /// It identifies this install to the gateway's operators (for example to revoke its
    /// sessions on a privacy request) and is never derived from the hardware or the advertising
    /// id. It survives session loss and ``revoke()``.
    public func installationID() throws -> UUID {
        if let cachedInstallationID { return cachedInstallationID }
        let id: UUID
        do {
            // Foundation's UUID() is RFC 9562 version 4: 122 random bits from the system CSPRNG.
            // Claimed, not written: an extension creating one at the same moment gets the same.
            id = try store.loadInstallationID() ?? store.claimInstallationID(UUID())
        } catch WeatherSessionStoreError.unreadable(.installationID) {
            id = UUID()
            try store.saveInstallationID(id)  // replaces the damaged one
        }
        cachedInstallationID = id
        return id
    }

    // MARK: - Renewal

    /// Joins the renewal in flight, or starts one from `current`.
    private func renew(from current: WeatherSession?) async throws -> WeatherSession {
        if let renewal {
            return try await renewal.value
        }
        // `renewal` is set before this method suspends, and the task cannot run its
        // actor-isolated body before then, so no second caller can slip in between.
        let task = Task { try await self.runRenewal(from: current) }
        renewal = task
        return try await task.value
    }

    /// The two requests a renewal may make; each has its own quota on the gateway (per session
    /// for refresh, per address for creation), so a `Retry-After` holds back only its own kind.
    private enum RenewalKind { case creation, refresh }

    private struct Hold {
        var setAt: Date
        var until: Date
        var refusal: WeatherAPIError
    }

    /// Throws the refusal this kind of request got while its `Retry-After` runs, with the
    /// seconds left. A clock set back to before the refusal ends the hold (it would otherwise
    /// stretch by however far the clock went back).
    private func checkHold(_ kind: RenewalKind) throws {
        guard let hold = holds[kind] else { return }
        let now = clock.now()
        let left = hold.until.timeIntervalSince(now)
        guard left > 0, now >= hold.setAt else {
            holds[kind] = nil
            return
        }
        var refusal = hold.refusal
        refusal.retryAfter = Int(left.rounded(.up))
        throw refusal
    }

    /// Holds this kind of request back when `error` is a refusal with `Retry-After`.
    private func noteHold(_ kind: RenewalKind, after error: any Error) {
        guard let refusal = error as? WeatherAPIError, let seconds = refusal.retryAfter, seconds > 0 else { return }
        let now = clock.now()
        holds[kind] = Hold(setAt: now, until: now.addingTimeInterval(TimeInterval(seconds)), refusal: refusal)
    }

    private func runRenewal(from current: WeatherSession?) async throws -> WeatherSession {
        // Cleared on the actor before the task completes, so a caller arriving after the end
        // sees the stored result instead of a finished task.
        defer { renewal = nil }

        var current = current
        // Another process sharing the store may have renewed the session since it was read: its
        // refresh token is the live one, and the one held here may be spent already. (Issued
        // later means it expires later; an older stored copy is one this process failed to save.
        // A store that cannot be read changes nothing here: the renewal goes on from memory.)
        if let stored = try? store.loadSession(), stored.expiresAt > current?.expiresAt ?? .distantPast {
            session = stored
            sessionLoaded = true
            if clock.now() < stored.refreshAfter { return stored }
            current = stored
        }
        // A hold is noted here, inside the renewal, so no caller can start another request
        // between this renewal's end and the hold.
        if let current, clock.now() < current.refreshTokenExpiresAt {
            try checkHold(.refresh)
            do {
                return try await refresh(current)
            } catch let error as WeatherAPIError where error.status == 401 {
                // Expired, revoked or replayed refresh token: only a new session helps.
            } catch {
                noteHold(.refresh, after: error)
                throw error
            }
        }
        try discardSession()
        try checkHold(.creation)
        do {
            return try await createSession()
        } catch {
            noteHold(.creation, after: error)
            throw error
        }
    }

    private func createSession() async throws -> WeatherSession {
        let body = CreateSessionRequest(
            platform: platform,
            appVersion: appVersion,
            installationId: try installationID().uuidString.lowercased()
        )
        let sentAt = clock.now()
        let response = try await connection.post("/v1/weather/session", json: body)
        return try adopt(response, sentAt: sentAt)
    }

    /// How many times a refresh that got no answer is sent again at once (see "Token lifecycle").
    static let unansweredRefreshRepeats = 2
    /// No repeat of an unanswered refresh starts later than this after the first went out, so
    /// that it reaches the gateway inside its 30 s retry window even when each attempt took a
    /// while to fail.
    public static let unansweredRefreshWindow: TimeInterval = 20

    private func refresh(_ current: WeatherSession) async throws -> WeatherSession {
        let firstSentAt = clock.now()
        var repeats = 0
        while true {
            let response: WeatherHTTPResponse
            do {
                response = try await connection.post(
                    "/v1/weather/session/refresh", json: SessionTokenRequest(current))
            } catch where repeats < Self.unansweredRefreshRepeats && !(error is CancellationError)
                && clock.now().timeIntervalSince(firstSentAt) < Self.unansweredRefreshWindow {
                // No answer: the gateway may have rotated the tokens. Only the same request,
                // soon, gets them back; an answer of any status is final.
                repeats += 1
                continue
            }
            // A repeat gets the pair the first attempt may have made: its deadlines count from then.
            return try adopt(response, sentAt: firstSentAt)
        }
    }

    /// Turns a create/refresh answer into the current session, in memory first. A store that
    /// cannot save it does not fail the renewal: the save is tried again on the next call.
    private func adopt(_ response: WeatherHTTPResponse, sentAt: Date) throws -> WeatherSession {
        let body = try WeatherGatewayConnection.decodeSuccess(WeatherSessionResponse.self, from: response)
        let renewed = WeatherSession(response: body, requestedAt: sentAt)
        session = renewed
        sessionLoaded = true
        refreshPausedUntil = nil
        holds = [:]
        sessionUnsaved = true
        saveIfUnsaved()
        return renewed
    }

    // MARK: - Store

    private func loadedSession() throws -> WeatherSession? {
        if !sessionLoaded {
            do {
                session = try store.loadSession()
            } catch WeatherSessionStoreError.unreadable(.session) {
                // Written by an incompatible version or damaged: a new session replaces it.
                session = nil
                try store.deleteSession()
            }
            sessionLoaded = true
        }
        return session
    }

    private func discardSession() throws {
        session = nil
        sessionLoaded = true
        sessionUnsaved = false
        holds[.refresh] = nil  // that session's quota; a new one starts afresh
        try store.deleteSession()
    }

    /// Saves a renewed session the store refused before; it stays unsaved if the store still
    /// refuses (the tokens work from memory meanwhile).
    private func saveIfUnsaved() {
        guard sessionUnsaved, let session else { return }
        if (try? store.saveSession(session)) != nil { sessionUnsaved = false }
    }

}
