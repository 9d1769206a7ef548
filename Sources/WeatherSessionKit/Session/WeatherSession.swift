import Foundation

/// The persisted state of one anonymous session, with every deadline on the local clock.
///
/// ## Why local deadlines
/// Phones' clocks are wrong surprisingly often (set by hand, travelling, no network time). If the
/// app compared its own clock with the server's `expiresAt`, a phone five hours fast would think
/// every fresh token already expired and refresh forever; one five hours slow would keep using
/// dead tokens. So the server's absolute times are used only for their *differences*, and all
/// deadlines are anchored at `receivedAt`, the local clock at the moment the response arrived:
///
/// - `expiresAt            = receivedAt + expiresIn`
/// - `refreshAfter         = receivedAt + expiresIn - (server.expiresAt - server.refreshAfter)`
/// - `refreshTokenExpiresAt = receivedAt + expiresIn + (server.refreshTokenExpiresAt - server.expiresAt)`
///
/// Network latency makes these deadlines late by at most one request's transit time; the
/// 401-refresh-retry path of ``WeatherClient`` covers that sliver. `refreshAfter` is clamped to
/// `receivedAt...expiresAt` so that a malformed hint can neither make the app refresh before it
/// has the token nor after the token died.
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

    /// Builds the session from a create or refresh response received at local time `receivedAt`.
    public init(response: WeatherSessionResponse, receivedAt: Date) {
        let lifetime = TimeInterval(max(0, response.expiresIn))
        let expiresAt = receivedAt.addingTimeInterval(lifetime)
        let refreshLead = response.expiresAt.timeIntervalSince(response.refreshAfter)
        let refreshAfter = receivedAt.addingTimeInterval(min(max(0, lifetime - refreshLead), lifetime))
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
        Mirror(self, children: [
            "anonymousSessionId": anonymousSessionId, "accessToken": redactedToken, "refreshToken": redactedToken,
            "expiresAt": expiresAt, "refreshAfter": refreshAfter, "refreshTokenExpiresAt": refreshTokenExpiresAt,
        ], displayStyle: .struct)
    }
}

/// What redacted values print as.
let redactedToken = "<redacted>"
