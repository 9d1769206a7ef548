import WeatherCore

/// Everything the session handlers share: storage, keys, policy, limits and counters.
final class SessionServices {
    let store: any GatewayStore
    let minter: TokenMinter
    let config: GatewayConfig
    let limiter: Limiter
    let metrics: Metrics

    init(store: any GatewayStore, minter: TokenMinter, config: GatewayConfig, limiter: Limiter, metrics: Metrics) {
        self.store = store
        self.minter = minter
        self.config = config
        self.limiter = limiter
        self.metrics = metrics
    }

    /// The body of every token response: the seven fields of API.md.
    func tokenResponse(status: Int, sessionId: String, access: String, refresh: String, lifetimes l: TokenLifetimes, now: Timestamp) -> Response {
        var w = JSONWriter()
        w.object { w in
            w.field("anonymousSessionId", sessionId)
            w.field("weatherAccessToken", access)
            w.field("refreshToken", refresh)
            w.field("expiresAt", l.accessExpiresAt.iso8601)
            w.field("refreshAfter", l.refreshAfter.iso8601)
            w.field("expiresIn", max(0, l.accessExpiresAt.seconds - now.seconds))
            w.field("refreshTokenExpiresAt", l.refreshExpiresAt.iso8601)
        }
        return .json(status, w.bytes, headers: Response.noStore)
    }
}

/// `POST /v1/weather/session`: an anonymous session for one app installation.
struct CreateSessionHandler: Responder {
    let services: SessionServices

    /// The request body's fields, in this order.
    static let fields = ["platform", "appVersion", "installationId"]

    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
        let body = try JSONBody.strings(Self.fields, from: request)
        let (platformField, appVersion, installationIdField) = (body[0], body[1], body[2])
        guard let platform = platformField else { throw .invalidRequest("field platform is required") }
        guard services.config.platforms.contains(platform) else {
            throw .invalidRequest("field platform must be one of \(services.config.platforms.joined(separator: ", "))")
        }
        if let v = appVersion {
            guard v.utf8.count <= 32, v.utf8.allSatisfy({ (0x20...0x7e).contains($0) }) else {
                throw .invalidRequest("field appVersion must be at most 32 printable ASCII characters")
            }
        }
        guard let installationId = installationIdField else { throw .invalidRequest("field installationId is required") }
        guard TokenSyntax.isUUID(installationId) else { throw .invalidRequest("field installationId must be a UUID") }

        // The address's quota is taken in the session's own transaction (one turn in the writers'
        // queue, not two); a refusal stores nothing.
        let pending = services.limiter.pendingCharge([services.limiter.sessionCreation(ip: context.clientIP)], context: context)

        let now = context.now
        let lifetimes = TokenLifetimes(now: now, policy: services.config.tokenPolicy)
        let sessionId: String
        let pair: TokenMinter.Pair
        let installationHash: String
        do {
            (sessionId, pair) = try services.minter.newSession(lifetimes: lifetimes)
            installationHash = services.minter.installationHash(installationId)
        } catch {
            throw .internalError
        }
        let grant: LimitGrant
        do {
            grant = try services.store.createSession(
                NewSession(id: sessionId, installationIdHash: installationHash, platform: platform, appVersion: appVersion, createdAt: now),
                tokens: pair.stored, charging: pending?.charge)
        } catch {
            throw .storageUnavailable
        }
        if let pending { try services.limiter.settle(pending, grant, context: context) }
        context.sessionId = sessionId
        services.metrics.count(Counters.Name.sessionsCreated, at: now)
        return services.tokenResponse(status: 201, sessionId: sessionId, access: pair.accessToken, refresh: pair.refreshToken, lifetimes: lifetimes, now: now)
    }
}

/// The body of refresh and revoke.
enum SessionProof {
    /// The request body's fields, in this order.
    static let fields = ["anonymousSessionId", "refreshToken"]

    static func read(_ request: Request) throws(HTTPError) -> (sessionId: String, refreshToken: String) {
        let body = try JSONBody.strings(fields, from: request)
        guard let id = body[0] else { throw .invalidRequest("field anonymousSessionId is required") }
        guard TokenSyntax.isSessionId(id) else { throw .invalidRequest("field anonymousSessionId is not a session id") }
        guard let token = body[1] else { throw .invalidRequest("field refreshToken is required") }
        guard token.hasPrefix(TokenKind.refresh.prefix), token.utf8.count <= 128 else {
            throw .invalidRequest("field refreshToken is not a refresh token")
        }
        return (id, token)
    }
}

/// `POST /v1/weather/session/refresh`: rotates both tokens, once, across every worker.
struct RefreshSessionHandler: Responder {
    let services: SessionServices

    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
        let (sessionId, refreshToken) = try SessionProof.read(request)
        context.sessionId = sessionId
        guard TokenSyntax.isWellFormed(refreshToken, kind: .refresh) else { throw .invalidRefreshToken }

        // The session's quota is charged only for a rotation: a wrong token costs a read, no
        // write, and whoever knows only a session id cannot use up its refreshes. A token still
        // to be rotated needs a unit free (read, not taken); the unit is taken once it has rotated.
        // A token already spent is the same request again inside the retry window (answered with
        // the pair it got, which issues nothing) or a replay (which revokes the session): never
        // refused by the quota. Charged up front, a retry after the quota's last refresh was 429
        // and waiting its `Retry-After` (longer than the window) made it a replay; a thief keeping
        // the quota empty hid his replays; and duplicates sent at once, each charged while the
        // token was still unspent, used up the quota and got 429 (a black-box race hunt).
        let now = context.now, hash = services.minter.tokenHash(refreshToken)
        let presented: PresentedRefreshToken?
        do {
            presented = try services.store.presentedRefreshToken(hash: hash, sessionId: sessionId, now: now)
        } catch {
            throw .storageUnavailable
        }
        guard let presented else {
            let why = services.store.refreshRefusal(hash: hash, sessionId: sessionId, now: now)
            services.metrics.count(Counters.Name.refreshRefused(why), at: now)
            var refused = HTTPError.invalidRefreshToken
            refused.reason = why
            throw refused
        }
        let quota = services.limiter.refresh(sessionId: sessionId)
        if !presented.spent { try services.limiter.requireRoom(quota, context: context) }

        let pair: TokenMinter.Pair
        do {
            pair = try services.minter.successorPair(of: refreshToken, lifetimes: TokenLifetimes(now: now, policy: services.config.tokenPolicy))
        } catch {
            throw .internalError
        }
        // Taken in the rotation's own transaction, only when it rotates (one turn in the writers'
        // queue, not two): a retry or a replay of a spent token is never charged.
        let outcome: RotationOutcome
        do {
            outcome = try services.store.rotate(
                presented, successor: pair.stored, retryWindow: services.config.tokenPolicy.refreshRetryWindow, now: now,
                charging: services.limiter.rotationCharge(quota, context: context))
        } catch {
            throw .storageUnavailable
        }
        switch outcome {
        case .rotated:
            services.metrics.count(Counters.Name.refreshes, at: now)
            services.metrics.touched(sessionId, at: now)  // last_seen_at, in the next batch
            return services.tokenResponse(
                status: 200, sessionId: sessionId, access: pair.accessToken, refresh: pair.refreshToken, lifetimes: pair.stored.lifetimes, now: now)
        case .retried(let lifetimes):
            services.metrics.count(Counters.Name.refreshRetries, at: now)
            return services.tokenResponse(
                status: 200, sessionId: sessionId, access: pair.accessToken, refresh: pair.refreshToken, lifetimes: lifetimes, now: now)
        case .invalid:
            throw .invalidRefreshToken
        case .reused:
            services.metrics.count(Counters.Name.refreshReuse, at: now)
            throw .refreshTokenReused
        }
    }
}

/// `POST /v1/weather/session/revoke`: the app forgets itself; every token stops at once.
struct RevokeSessionHandler: Responder {
    let services: SessionServices

    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
        let (sessionId, refreshToken) = try SessionProof.read(request)
        context.sessionId = sessionId
        guard TokenSyntax.isWellFormed(refreshToken, kind: .refresh) else { throw .invalidRefreshToken }
        let outcome: SessionRevocation
        do {
            outcome = try services.store.revokeSession(
                sessionId: sessionId, presentingRefreshTokenHash: services.minter.tokenHash(refreshToken), now: context.now)
        } catch {
            throw .storageUnavailable
        }
        guard outcome != .notProven else { throw .invalidRefreshToken }
        // Sessions revoked, not answers: a revoke repeated (204 again) counted each time.
        if outcome == .revoked { services.metrics.count(Counters.Name.revokes, at: context.now) }
        return Response(status: 204, headers: Response.noStore)
    }
}
