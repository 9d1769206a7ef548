import WeatherCore

/// An answer other than success: it knows its status, code and a message for a person.
public struct HTTPError: Error, Sendable, Equatable {
    public var status: Int
    public var code: String
    public var message: String
    public var headers: [String: String] = [:]
    /// Why, for the request's log line only (`refused=`; never sent): the quota that refused a
    /// 429, what a 401 lacked. A short fixed word (an `AuthRefusal`, a bucket key's prefix),
    /// never anything the client sent: it is logged as it is.
    public var reason: String?

    public init(status: Int, code: String, message: String, headers: [String: String] = [:], reason: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers
        self.reason = reason
    }

    /// 400 `invalid_request` saying what is wrong (never echoing a secret).
    public static func invalidRequest(_ message: String) -> HTTPError { HTTPError(status: 400, code: "invalid_request", message: message) }
    public static let unauthorized = HTTPError(
        status: 401, code: "unauthorized", message: "a live X-Weather-Session-Token or a valid X-Weather-Token is required")
    /// 401 for a weather request, with why (`AuthRefusal`). Once the legacy path is off, an old
    /// app's `X-Weather-Token` is told so, and no answer speaks of "a valid X-Weather-Token".
    public static func unauthorized(_ refusal: AuthRefusal, legacyPathOn: Bool) -> HTTPError {
        var error =
            switch (refusal, legacyPathOn) {
            case (.legacyOff, _):
                HTTPError(
                    status: 401, code: "unauthorized",
                    message: "this gateway no longer accepts X-Weather-Token; update the app (it creates an anonymous session, POST /v1/weather/session)")
            case (_, false):
                HTTPError(status: 401, code: "unauthorized", message: "a live X-Weather-Session-Token is required")
            default:
                unauthorized
            }
        error.reason = refusal.rawValue
        return error
    }
    public static let invalidRefreshToken = HTTPError(
        status: 401, code: "invalid_refresh_token", message: "the refresh token is unknown, expired, revoked or belongs to another session")
    public static let refreshTokenReused = HTTPError(
        status: 401, code: "refresh_token_reused", message: "this refresh token was already used; the session is revoked, create a new one")
    public static let notFound = HTTPError(status: 404, code: "not_found", message: "no such route")
    public static let payloadTooLarge = HTTPError(status: 413, code: "payload_too_large", message: "the body is larger than 4096 bytes")
    public static let unsupportedMediaType = HTTPError(status: 415, code: "unsupported_media_type", message: "send the body as application/json")
    public static let storageUnavailable = HTTPError(
        status: 503, code: "storage_unavailable", message: "the database is not available right now; try again shortly")
    public static let internalError = HTTPError(status: 500, code: "internal_error", message: "something went wrong on our side")
    public static let providerError = HTTPError(status: 502, code: "provider_error", message: "the weather provider failed; try again later")
    /// Every provider skipped the request for its dates or answered without them: a retry
    /// cannot help, so the message does not suggest one (API.md names no code of its own).
    public static let daysNotCovered = HTTPError(
        status: 502, code: "provider_error", message: "the weather providers of this gateway do not cover the days asked")
    public static let providerTimeout = HTTPError(status: 504, code: "provider_timeout", message: "the weather provider did not answer in time")
    /// 429 from the quota named `limit` (the prefix of its bucket key, as `limited.<limit>` counts it).
    public static func rateLimited(retryAfter: Int64, limit: String) -> HTTPError {
        HTTPError(
            status: 429, code: "rate_limited", message: "too many requests; retry after \(retryAfter) seconds", headers: ["Retry-After": "\(retryAfter)"],
            reason: limit)
    }
    /// 405 `method_not_allowed` with the route's methods in `Allow`.
    public static func methodNotAllowed(_ allow: [String]) -> HTTPError {
        HTTPError(
            status: 405, code: "method_not_allowed", message: "use \(allow.joined(separator: " or ")) on this route",
            headers: ["Allow": allow.joined(separator: ", ")])
    }

    /// The error envelope of API.md.
    public var response: Response {
        var w = JSONWriter()
        w.object { w in
            w.key("error")
            w.object { w in
                w.field("code", code)
                w.field("message", message)
            }
        }
        return .json(status, w.bytes, headers: headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }
}

/// Why a weather request was refused 401, for its log line (`refused=`) and `weatherctl stats`
/// (`unauthorized.<reason>`): after the legacy path is turned off, old app builds (`legacy_off`)
/// stand apart from guesses (`legacy_token`) and from sessions that ended (`session_token`).
public enum AuthRefusal: String, Sendable {
    /// An `X-Weather-Token` while `CLOSET_WEATHER_PROXY_TOKEN` is unset, and no session token.
    case legacyOff = "legacy_off"
    /// A non-empty `X-Weather-Session-Token` that is malformed, unknown, expired or revoked,
    /// and no legacy token that matches.
    case sessionToken = "session_token"
    /// An `X-Weather-Token` that does not match.
    case legacyToken = "legacy_token"
    /// Neither header.
    case noToken = "no_token"
}
