import Foundation

/// The persisted state of one anonymous session, with every deadline on the local clock.
///
/// ## Why local deadlines
/// Phones' clocks are wrong surprisingly often (set by hand, travelling, no network time). If the
/// app compared its own clock with the server's `expiresAt`, a phone five hours fast would think
/// every fresh token already expired and refresh forever; one five hours slow would keep using
/// dead tokens. So the server's absolute times are used only for their *differences*, and all
/// deadlines are anchored at `requestedAt`, the local clock at the moment the creating or
/// refreshing request went out:
///
/// - `expiresAt            = requestedAt + expiresIn`
/// - `refreshAfter         = requestedAt + expiresIn - (server.expiresAt - server.refreshAfter)`
/// - `refreshTokenExpiresAt = requestedAt + expiresIn + (server.refreshTokenExpiresAt - server.expiresAt)`
///
/// The server issued the tokens after the request went out, so these deadlines are early by
/// the request's round trip, never late: an answer that arrives long after (a suspended app, a
/// stalled transfer) does not leave the app holding a token it believes alive. `refreshAfter` is
/// clamped to `requestedAt...expiresAt` so that a malformed hint can neither make the app
/// refresh before it has the token nor after the token died.
///
/// The value holds bearer tokens: it is stored in a ``WeatherSessionStore`` and never logged
/// (its `description` redacts them).
public struct WeatherSession: Sendable, Equatable, Codable, CustomStringConvertible {
    /// The anonymous session id, `aws_...`; unchanged across refreshes.
    public var anonymousSessionId: String
    /// The access token for `X-Weather-Session-Token`.
    public var accessToken: String
    /// The refresh token; single use.
    public var refreshToken: String
    /// Local time at which the access token expires.
    public var expiresAt: Date
    /// Local time after which the service refreshes proactively.
    public var refreshAfter: Date
    /// Local time at which the refresh token expires; after it only a new session helps.
    public var refreshTokenExpiresAt: Date

    /// Creates a session value.
    public init(
        anonymousSessionId: String, accessToken: String, refreshToken: String,
        expiresAt: Date, refreshAfter: Date, refreshTokenExpiresAt: Date
    ) {
        self.anonymousSessionId = anonymousSessionId
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.refreshAfter = refreshAfter
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
    }

    /// Builds the session from a create or refresh response to a request sent at local time
    /// `requestedAt`. The gateway issued the tokens after that, so deadlines counted from it
    /// come out early, never late, however long the answer took to arrive.
    public init(response: WeatherSessionResponse, requestedAt: Date) {
        let lifetime = TimeInterval(max(0, response.expiresIn))
        let expiresAt = requestedAt.addingTimeInterval(lifetime)
        let refreshLead = response.expiresAt.timeIntervalSince(response.refreshAfter)
        let refreshAfter = requestedAt.addingTimeInterval(min(max(0, lifetime - refreshLead), lifetime))
        let refreshTail = response.refreshTokenExpiresAt.timeIntervalSince(response.expiresAt)
        self.init(
            anonymousSessionId: response.anonymousSessionId,
            accessToken: response.weatherAccessToken,
            refreshToken: response.refreshToken,
            expiresAt: expiresAt,
            refreshAfter: refreshAfter,
            refreshTokenExpiresAt: expiresAt.addingTimeInterval(refreshTail)
        )
    }

    /// Redacted: shows the session id and deadlines, never a token.
    public var description: String {
        "WeatherSession(\(anonymousSessionId), refreshAfter: \(refreshAfter), expiresAt: \(expiresAt))"
    }
}

extension WeatherSession: CustomReflectable {
    /// Redacted too, for `dump` and debuggers: the tokens show as `<redacted>`.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "anonymousSessionId": anonymousSessionId, "accessToken": redactedToken, "refreshToken": redactedToken,
                "expiresAt": expiresAt, "refreshAfter": refreshAfter, "refreshTokenExpiresAt": refreshTokenExpiresAt,
            ], displayStyle: .struct)
    }
}

/// What redacted values print as.
let redactedToken = "<redacted>"
