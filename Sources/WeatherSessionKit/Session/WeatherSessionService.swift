import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

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
/// // Privacy request; "reset app" also replaces the installation id:
/// try await service.revoke(resettingInstallationID: true)
/// ```
///
/// ## Token lifecycle
/// What ``accessToken()`` does, by the local clock (see ``WeatherSession`` for why local):
/// - **no session**: creates one (`POST /v1/weather/session`) with the installation id;
/// - **before `refreshAfter`**: returns the stored token, no network;
/// - **between `refreshAfter` and `expiresAt`**: returns the stored token at once and starts a
///   refresh in the background (unless one is already running), so a call holding a valid token
///   never waits on the network (an app's "what to wear" screen waited up to 15 s for a refresh
///   and its repeats while the gateway was down: a review). The stored token stays valid until
///   its own expiry after a rotation (API.md). If the refresh fails (offline, 5xx, 429) it is
///   not attempted again for `refreshRetryInterval` (or a 429's `Retry-After`, if longer) so a
///   failing server is not hit on every call;
/// - **after `expiresAt`**: must refresh; if that fails, the error is thrown;
/// - **refresh answered 401** (refresh token expired, revoked, or replayed): the stored session
///   is dropped, the installation id is kept, and a new session is created. Same when the
///   refresh token is known to have expired locally, without asking.
/// - **refresh with no answer** (the connection failed after the request may have gone out, or a
///   5xx other than the gateway's own `storage_unavailable` and `internal_error`: a web server in
///   front answers 502/503/504 when it gives up on a busy gateway, which may still rotate the
///   tokens; not when it never left the device, such as `notConnectedToInternet`): the very
///   same request is sent again after 1, 2, 4 and 8 s (or the 5xx's `Retry-After`, if longer;
///   a caller that needs the new token waits), as long as the repeat starts less than
///   ``unansweredRefreshWindow`` (20 s) after the first went out. The gateway may
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
/// away: a refresh abandoned after the server rotated the tokens would lose them. A caller that
/// is cancelled (a SwiftUI `.task` whose view went away) stops waiting at once with
/// `CancellationError`, and the renewal goes on for the others and the store. The renewal and
/// the revocation clear themselves when they end outside the app's ``WeatherRenewalActivity``,
/// so an activity that throws without running its work (no background time left) leaves the
/// service as it was, not waiting for ever on a renewal that never ran (a review).
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
    /// The renewal every caller joins; cleared by its task when it ends (`startRenewal`).
    private var renewal: Task<WeatherSession, any Error>?
    /// After a failed optional refresh, no new attempt before this time (the token still works).
    private var refreshPausedUntil: Date?
    /// A creation or a refresh answered with `Retry-After`, held back until it has passed.
    private var holds: [RenewalKind: Hold] = [:]
    /// What each renewal and revocation runs inside (background time on iOS); `nil`: nothing.
    private let activity: (any WeatherRenewalActivity)?
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
    ///   - activity: runs every renewal and revocation, so an app can ask the system for time to
    ///     finish one when it is sent to the background (see ``WeatherRenewalActivity``); `nil`
    ///     runs them as they are.
    public init(
        baseURL: URL,
        store: any WeatherSessionStore,
        transport: any WeatherHTTPTransport = URLSessionWeatherTransport(),
        clock: any WeatherClock = SystemWeatherClock(),
        platform: String = "ios",
        appVersion: String? = nil,
        refreshRetryInterval: TimeInterval = 20,
        activity: (any WeatherRenewalActivity)? = nil
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
        self.activity = activity
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
        // Optional refresh: the current token is still valid, so nobody waits for it. Not while
        // a revocation is presenting the refresh token (`renew` would wait for it), nor beside a
        // renewal already running.
        if let refreshPausedUntil, now < refreshPausedUntil {
            return current.accessToken
        }
        if renewal == nil && revocation == nil {
            startRenewal(from: current, optional: true)
        }
        return current.accessToken
    }

    /// After an optional refresh from `current` failed, while that token is still good: no
    /// new attempt for `refreshRetryInterval`, or the refusal's `Retry-After` when longer.
    private func pauseRefreshing(after error: any Error, from current: WeatherSession, began: Date) {
        let later = clock.now()
        // The session was dropped (the refresh got 401) or the token died meanwhile: the next
        // call renews as it must.
        guard session == current, later < current.expiresAt else { return }
        // The next try presents the same refresh token; counted from when this one began, it
        // reaches a gateway that may have rotated without our hearing while that gateway still
        // takes it for a repeat (its retry window), not for a replay.
        let retryAfter = (error as? WeatherAPIError)?.retryAfter.map(TimeInterval.init) ?? 0
        refreshPausedUntil = max(began.addingTimeInterval(refreshRetryInterval), later.addingTimeInterval(retryAfter))
    }

    /// Waits until no renewal is running (tests: an optional refresh runs without its caller).
    func renewalsSettled() async {
        while let renewal { _ = await renewal.result }
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

    /// Revokes the session on the gateway (`POST /v1/weather/session/revoke`), then forgets it.
    ///
    /// The session is forgotten only once the gateway has ended it (204) or said it was already
    /// dead (401). When the gateway could not be told (offline, 429, 5xx) the error is thrown and
    /// the session is kept, still working, so that calling `revoke()` again (when the app is back
    /// online, or at its next launch) can still end it: forgetting the refresh token first would
    /// leave the gateway's session alive for up to its 30 days with nothing left to end it.
    /// Renewals wait while a revocation is in flight, so it never presents a spent token.
    ///
    /// - Parameter resettingInstallationID: also replace the installation id with a new random
    ///   one ("reset app"), so the next session cannot be linked to the old ones by it. Done
    ///   only once the revocation succeeded (or there was no session). The id lives in the
    ///   store, which outlives the app's deletion when it is the Keychain: this is the way to
    ///   start over. Another process sharing the store (a widget) keeps the id it has read
    ///   until it restarts.
    public func revoke(resettingInstallationID: Bool = false) async throws {
        if resettingInstallationID { installationIDResetAsked = true }
        if let revocation {
            try await revocation.value
            return
        }
        // The new id is saved inside the revocation's task, before renewals waiting for it go
        // on: saved after, a renewal could create the next session under the old id, which the
        // reset promised to end (a review: 24 of 30 resets with a renewal of higher priority).
        let task = Task {
            defer {
                revocation = nil
                installationIDResetAsked = false
            }
            try await underActivity { try await self.runRevocation() }
            if installationIDResetAsked {
                let id = UUID()
                try store.saveInstallationID(id)
                cachedInstallationID = id
            }
        }
        revocation = task
        try await task.value
    }

    /// The revocation every `revoke()` caller joins; renewals wait for it. Cleared by its task.
    private var revocation: Task<Void, any Error>?
    /// A caller of the revocation in flight asked for a new installation id.
    private var installationIDResetAsked = false

    private func runRevocation() async throws {
        // Let a renewal in flight finish first, so its new tokens are the ones revoked rather
        // than written back after the revoke. Its outcome does not matter here.
        while let pending = renewal {
            _ = await pending.result
        }
        guard let current = try loadedSession() else { return }
        let response = try await connection.post(
            "/v1/weather/session/revoke", json: SessionTokenRequest(current))
        guard response.isSuccess || response.status == 401 else {
            throw WeatherAPIError(response: response)
        }
        refreshPausedUntil = nil
        discardSession()
    }

    /// The installation id: a random version-4 UUID, created and stored on first use.
    ///
    /// It identifies this install to the gateway's operators (for example to revoke its
    /// sessions on a privacy request) and is never derived from the hardware or the advertising
    /// id. It survives session loss and ``revoke(resettingInstallationID:)`` unless that is
    /// asked to replace it.
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

    /// The installation id a new session is created under, read from the store again: another
    /// process sharing it (an app's widget) may have replaced it since this one cached it, by the
    /// app's ``revoke(resettingInstallationID:)``, and a session created under the old id would
    /// tie the app's next sessions to it (a client-kit audit, session 30: the widget created one
    /// under its cached id, and the app then took that session from the store). A store that
    /// cannot be read leaves the cached id.
    private func installationIDForCreation() throws -> UUID {
        if let stored = try? store.loadInstallationID(), stored != cachedInstallationID { cachedInstallationID = stored }
        return try installationID()
    }

    // MARK: - Renewal

    /// Joins the renewal in flight, or starts one from `current`. A caller that is cancelled
    /// stops waiting at once (`CancellationError`); the renewal runs on for the others.
    private func renew(from current: WeatherSession?) async throws -> WeatherSession {
        var current = current
        while let revocation {
            // A renewal now would spend the refresh token the revocation is presenting. After
            // it, the session is gone (revoked) or unchanged (the gateway was not reached). Its
            // own outcome is the revoking caller's; a cancelled caller stops waiting here too.
            do { try await Self.value(of: revocation) } catch { try Task.checkCancellation() }
            current = session
        }
        if let renewal {
            return try await Self.value(of: renewal)
        }
        return try await Self.value(of: startRenewal(from: current, optional: false))
    }

    /// Starts the renewal every caller joins. `renewal` is set before the caller suspends, and
    /// the task cannot run its actor-isolated body before then, so no second caller can slip in
    /// between. The task clears `renewal` on the actor before it completes, so a caller arriving
    /// after the end sees the stored result instead of a finished task; for an `optional`
    /// refresh it notes the pause in the same step, so no caller can start another refresh
    /// between the failure and the pause.
    @discardableResult
    private func startRenewal(from start: WeatherSession?, optional: Bool) -> Task<WeatherSession, any Error> {
        let began = clock.now()
        let task = Task {
            do {
                defer { renewal = nil }
                return try await underActivity { try await self.runRenewal(from: start) }
            } catch {
                if optional, let start { pauseRefreshing(after: error, from: start, began: began) }
                throw error
            }
        }
        renewal = task
        return task
    }

    /// `work` inside the app's ``WeatherRenewalActivity``, if it gave one.
    private nonisolated func underActivity<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
        guard let activity else { return try await work() }
        return try await activity.run(work)
    }

    /// `task.value`, except that a cancelled caller gets `CancellationError` at once instead of
    /// waiting for the task (which `task.value` does, cancelled or not). The task is not cancelled.
    private static func value<T: Sendable>(of task: Task<T, any Error>) async throws -> T {
        let waiter = OneAnswer<T>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                waiter.deliver(to: continuation)
                Task { waiter.answer(await task.result) }
            }
        } onCancel: {
            waiter.answer(.failure(CancellationError()))
        }
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
        discardSession()
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
            installationId: try installationIDForCreation().uuidString.lowercased()
        )
        let sentAt = clock.now()
        let response = try await connection.post("/v1/weather/session", json: body)
        return try adopt(response, sentAt: sentAt)
    }

    /// The pauses before each repeat of a refresh that got no answer of the gateway's own (see
    /// "Token lifecycle"): a dropped connection is often back within seconds, a longer outage
    /// is not worth more requests.
    static let unansweredRefreshPauses: [TimeInterval] = [1, 2, 4, 8]
    /// No repeat of an unanswered refresh starts later than this after the first went out, so
    /// that it reaches the gateway inside its 30 s retry window even when each attempt took a
    /// while to fail.
    public static let unansweredRefreshWindow: TimeInterval = 20

    /// The gateway's own 5xx codes for a refresh, each answered before anything was committed
    /// (its database could not be read or written; it could not make the tokens): nothing to
    /// repeat. nginx's `service_unavailable` and bare 502/504 pages are not among them.
    static let finalServerErrors: Set<String> = [WeatherAPIError.Code.storageUnavailable, WeatherAPIError.Code.internalError]

    /// Failures that mean the request never left the device or never reached the gateway's HTTP
    /// layer (no network, no route, no connection, no TLS): nothing can have been rotated.
    static let neverSentCodes: Set<URLError.Code> = [
        .notConnectedToInternet, .cannotFindHost, .cannotConnectToHost, .dnsLookupFailed,
        .internationalRoamingOff, .dataNotAllowed, .callIsActive, .secureConnectionFailed,
        .serverCertificateUntrusted, .serverCertificateHasBadDate, .serverCertificateNotYetValid,
        .serverCertificateHasUnknownRoot, .clientCertificateRejected, .clientCertificateRequired,
        .appTransportSecurityRequiresSecureConnection,
    ]

    private func refresh(_ current: WeatherSession) async throws -> WeatherSession {
        let firstSentAt = clock.now()
        var pauses = Self.unansweredRefreshPauses[...]
        // Whether an attempt so far may have reached the gateway without its answer reaching us.
        var mayHaveRotated = false
        while true {
            let outcome: Result<WeatherHTTPResponse, any Error>
            do {
                outcome = .success(
                    try await connection.post(
                        "/v1/weather/session/refresh", json: SessionTokenRequest(current)))
            } catch {
                outcome = .failure(error)
            }
            // No answer, or a 5xx that is not the gateway's own (a web server that gave up waiting
            // for a busy gateway answers 502/503/504 while the gateway may still rotate the
            // tokens): only the same request, inside the gateway's retry window, gets the new
            // pair back. A 4xx, or the gateway's own 5xx (`finalServerErrors`), is final.
            let failed: Bool, maybeDelivered: Bool
            switch outcome {
            case .success(let response):
                failed = response.status >= 500 && !Self.finalServerErrors.contains(WeatherAPIError(response: response).code)
                maybeDelivered = failed
            case .failure(let error):
                failed = !(error is CancellationError)
                maybeDelivered = failed && !((error as? URLError).map { Self.neverSentCodes.contains($0.code) } ?? false)
            }
            // A refresh that never got out is not repeated (offline: the caller hears at once);
            // once one may have, the repeats go on through failures to connect (a network
            // switching over).
            mayHaveRotated = mayHaveRotated || maybeDelivered
            if failed, mayHaveRotated, let pause = pauses.popFirst() {
                let retryAfter = (try? outcome.get()).flatMap { $0.header("Retry-After").flatMap(TimeInterval.init) } ?? 0
                let wait = max(pause, retryAfter)
                if clock.now().timeIntervalSince(firstSentAt) + wait < Self.unansweredRefreshWindow {
                    try await clock.sleep(for: wait)
                    continue
                }
            }
            // A repeat gets the pair the first attempt may have made: its deadlines count from then.
            return try adopt(try outcome.get(), sentAt: firstSentAt)
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
                // Written by an incompatible version or damaged: a new session replaces it (and
                // overwrites it once saved; a store that cannot delete it does not stop that).
                session = nil
                try? store.deleteSession()
            }
            sessionLoaded = true
        }
        return session
    }

    /// Forgets a dead session. Deleting it from the store is best effort: a store that cannot
    /// (a folder made read-only, a locked Keychain) must not keep the app on a session the
    /// gateway refuses; it threw, every call repeated the two refused requests, and no new
    /// session was ever made (a black-box run of the kit, session 17). The new session replaces
    /// the stored one once the store takes writes again.
    private func discardSession() {
        session = nil
        sessionLoaded = true
        sessionUnsaved = false
        holds[.refresh] = nil  // that session's quota; a new one starts afresh
        try? store.deleteSession()
    }

    /// Saves a renewed session the store refused before; it stays unsaved if the store still
    /// refuses (the tokens work from memory meanwhile).
    private func saveIfUnsaved() {
        guard sessionUnsaved, let session else { return }
        if (try? store.saveSession(session)) != nil { sessionUnsaved = false }
    }

}

/// `dump(service)` and debuggers show only the gateway root: the actor's state holds the
/// installation id, which must not reach a log (a review).
extension WeatherSessionService: CustomReflectable {
    public nonisolated var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL], displayStyle: .class)
    }
}

/// The first answer given, handed to a continuation once it is there (either may come first).
private final class OneAnswer<T: Sendable>: @unchecked Sendable {
    // @unchecked: everything below is touched only under `lock`.
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var result: Result<T, any Error>?
    private var delivered = false

    func deliver(to continuation: CheckedContinuation<T, any Error>) {
        let ready: Result<T, any Error>? = lock.withLock {
            guard let result else {
                self.continuation = continuation
                return nil
            }
            delivered = true
            return result
        }
        if let ready { continuation.resume(with: ready) }
    }

    func answer(_ result: Result<T, any Error>) {
        let waiting: CheckedContinuation<T, any Error>? = lock.withLock {
            guard self.result == nil, !delivered else { return nil }
            self.result = result
            guard let continuation else { return nil }
            self.continuation = nil
            delivered = true
            return continuation
        }
        waiting?.resume(with: result)
    }
}
