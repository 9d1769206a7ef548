import Foundation

/// The body of a 201 from `POST /v1/weather/session` and of a 200 from `.../session/refresh`.
///
/// All seven fields of the contract, decoded as sent. The server's times (`expiresAt`,
/// `refreshAfter`, `refreshTokenExpiresAt`) are on the server's clock; ``WeatherSession``
/// turns them into local deadlines using ``expiresIn``. Never log a value of this type: it
/// holds bearer tokens.
public struct WeatherSessionResponse: Sendable, Equatable, Codable {
    /// The anonymous session, `aws_...`; unchanged for the life of the session.
    public var anonymousSessionId: String
    /// The access token, `wta_...`, sent as `X-Weather-Session-Token`.
    public var weatherAccessToken: String
    /// The rotating refresh token, `wtr_...`; dead as soon as it has been used once.
    public var refreshToken: String
    /// When the access token expires, on the server's clock.
    public var expiresAt: Date
    /// When the server suggests refreshing, on the server's clock.
    public var refreshAfter: Date
    /// Seconds from the server's answer until the access token expires: the clock-independent
    /// lifetime left (a refresh repeated within the retry window answers with the same pair and
    /// its lifetime left, not the whole).
    public var expiresIn: Int
    /// When the refresh token expires, on the server's clock.
    public var refreshTokenExpiresAt: Date

    /// Creates a response value (for tests and previews).
    public init(
        anonymousSessionId: String, weatherAccessToken: String, refreshToken: String,
        expiresAt: Date, refreshAfter: Date, expiresIn: Int, refreshTokenExpiresAt: Date
    ) {
        self.anonymousSessionId = anonymousSessionId
        self.weatherAccessToken = weatherAccessToken
        self.refreshToken = refreshToken
        self.expiresAt = expiresAt
        self.refreshAfter = refreshAfter
        self.expiresIn = expiresIn
        self.refreshTokenExpiresAt = refreshTokenExpiresAt
    }
}

extension WeatherSessionResponse: CustomStringConvertible, CustomReflectable {
    /// Redacted: the session id and server times, never a token.
    public var description: String {
        "WeatherSessionResponse(\(anonymousSessionId), refreshAfter: \(refreshAfter), expiresAt: \(expiresAt))"
    }

    /// Redacted too, for `dump` and debuggers.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "anonymousSessionId": anonymousSessionId, "weatherAccessToken": redactedToken, "refreshToken": redactedToken,
                "expiresAt": expiresAt, "refreshAfter": refreshAfter, "expiresIn": expiresIn,
                "refreshTokenExpiresAt": refreshTokenExpiresAt,
            ], displayStyle: .struct)
    }
}
