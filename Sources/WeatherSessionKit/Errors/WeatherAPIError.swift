import Foundation

/// The gateway answered with an error status; carries the status and the envelope's code/message.
///
/// Thrown by ``WeatherClient`` and ``WeatherSessionService`` whenever the server answered but not
/// with success, and again, without a request, while a creation's or a refresh's `Retry-After`
/// runs (with the seconds left; see ``WeatherSessionService``). Failures to get an answer at all (offline, timeout) are not wrapped: they are
/// thrown as the transport threw them (`URLError` with ``URLSessionWeatherTransport``).
///
/// Switch on ``code`` (stable), show ``message`` only in diagnostics (it is for a person, in
/// English). For `429 rate_limited`, ``retryAfter`` says how many seconds to wait; a 502 or 504
/// carries one too when the gateway has paused a failing provider (asking that gateway worker
/// sooner gets the same error without the provider being asked).
///
/// ```swift
/// do { _ = try await client.weather(lat: 31.23, lon: 121.47) }
/// catch let error as WeatherAPIError where error.code == WeatherAPIError.Code.rateLimited {
///     scheduleRetry(after: error.retryAfter ?? 60)
/// }
/// ```
public struct WeatherAPIError: LocalizedError, Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status, for example 401, 429 or 502.
    public var status: Int
    /// The envelope's `code`, or ``Code/unexpectedResponse`` when the body was not an envelope.
    public var code: String
    /// The envelope's `message`.
    public var message: String
    /// Seconds from `Retry-After`, when the server sent one (always for 429; for 502/504 while the
    /// gateway pauses a failing provider).
    public var retryAfter: Int?

    /// Creates an error.
    public init(status: Int, code: String, message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    /// The longest `Retry-After` taken from a response, in seconds: a day.
    public static let longestRetryAfter = 86_400

    /// Reads the error out of a non-success response; never fails.
    ///
    /// A body that is not the gateway's envelope (an HTML 502 page from a proxy, an empty body)
    /// still yields an error with the status and ``Code/unexpectedResponse``.
    public init(response: WeatherHTTPResponse) {
        // At most a day (the gateway's longest wait, a session's distinct-cell quota): a
        // `Retry-After` near `Int.max` from a broken proxy overflowed the hold's arithmetic and
        // stopped the app at its next call (a client-kit audit, session 30).
        let retryAfter = response.header("Retry-After")
            .flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
            .map { min(max(0, $0), Self.longestRetryAfter) }
        if let envelope = try? WeatherJSON.decoder().decode(WeatherErrorEnvelope.self, from: response.body) {
            self.init(
                status: response.status, code: envelope.error.code,
                message: envelope.error.message, retryAfter: retryAfter)
        } else {
            self.init(
                status: response.status, code: Code.unexpectedResponse,
                message: "HTTP \(response.status) without an error envelope",
                retryAfter: retryAfter)
        }
    }

    /// `"<status> <code>: <message>"`; never contains a token.
    public var description: String {
        var text = "\(status) \(code): \(message)"
        if let retryAfter { text += " (retry after \(retryAfter) s)" }
        return text
    }

    /// The same as ``description``, so `localizedDescription` (and logging an `any Error`) says
    /// what happened rather than Foundation's "The operation could not be completed". It is for
    /// diagnostics, in English; show the user your own text chosen by ``code``.
    public var errorDescription: String? { description }

    /// Codes the contract names, for matching without typos.
    public enum Code {
        /// 401: no live session token (and no legacy token) on a weather request.
        public static let unauthorized = "unauthorized"
        /// 401 from refresh: unknown, expired, revoked or foreign refresh token.
        public static let invalidRefreshToken = "invalid_refresh_token"
        /// 401 from refresh: a rotated refresh token was replayed; the session is revoked.
        public static let refreshTokenReused = "refresh_token_reused"
        /// 429: a quota was hit; see ``WeatherAPIError/retryAfter``.
        public static let rateLimited = "rate_limited"
        /// 400: a parameter or field was rejected; the message names it.
        public static let invalidRequest = "invalid_request"
        /// 502: the weather provider failed (with ``WeatherAPIError/retryAfter`` while it is paused).
        public static let providerError = "provider_error"
        /// 504: the weather provider timed out (with ``WeatherAPIError/retryAfter`` while it is paused).
        public static let providerTimeout = "provider_timeout"
        /// 503: no weather provider is configured on the gateway.
        public static let providerNotConfigured = "provider_not_configured"
        /// 404: no such route (a wrong base URL or mount prefix).
        public static let notFound = "not_found"
        /// 405: the route exists, the method does not.
        public static let methodNotAllowed = "method_not_allowed"
        /// 413: the body was too large.
        public static let payloadTooLarge = "payload_too_large"
        /// 415: the body was not sent as `application/json`.
        public static let unsupportedMediaType = "unsupported_media_type"
        /// 503: the gateway's database could not be read or written; try again shortly.
        public static let storageUnavailable = "storage_unavailable"
        /// 500: the gateway failed in a way it did not expect.
        public static let internalError = "internal_error"
        /// 503 (502, 504): the web server in front of the gateway could not get an answer from it
        /// (workers busy, stopped or restarting; the shipped nginx and Apache configurations send
        /// this envelope), or the gateway's configuration is broken.
        public static let serviceUnavailable = "service_unavailable"
        /// Made up by this kit, not sent by the gateway: the server answered with something
        /// that is not the contract's JSON (a proxy's HTML page, a malformed success body).
        public static let unexpectedResponse = "unexpected_response"
    }
}
