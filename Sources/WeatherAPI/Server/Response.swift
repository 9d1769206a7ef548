import WeatherCore

/// An HTTP response before it is written as CGI output.
public struct Response: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response with the content type API.md names.
    public static func json(_ status: Int, _ body: [UInt8], headers: [(name: String, value: String)] = []) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: body)
    }

    /// Headers of every response that carries a token (RFC 6749 §5.1).
    public static let noStore: [(name: String, value: String)] = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]

    /// The bytes a CGI/FastCGI responder writes: `Status:` line, headers, blank line, body.
    public func cgiBytes(includeBody: Bool = true) -> [UInt8] {
        var out = cgiHead(reserving: includeBody ? body.count : 0)
        if includeBody { out += body }
        return out
    }

    /// The `Status:` line, headers and blank line, in one buffer sized up front (this runs for
    /// every response; a FastCGI server writes the body after it without copying it in here).
    public func cgiHead(reserving extra: Int = 0) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128 + headers.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + extra)
        out.appendUTF8("Status: ")
        appendDecimal(status, to: &out)
        out.append(UInt8(ascii: " "))
        out.appendUTF8(Response.reason(status))
        out.appendUTF8("\r\n")
        for h in headers {
            out.appendUTF8(h.name)
            out.appendUTF8(": ")
            out.appendUTF8(h.value)
            out.appendUTF8("\r\n")
        }
        // A 204 carries no Content-Length (RFC 9110 §8.6: a server must not send one), which the
        // revoke's 204 did, through nginx and Apache alike.
        if status != 204 {
            out.appendUTF8("Content-Length: ")
            appendDecimal(body.count, to: &out)
            out.appendUTF8("\r\n")
        }
        out.appendUTF8("\r\n")
        return out
    }

    private func appendDecimal(_ n: Int, to out: inout [UInt8]) { out.appendUTF8(String(n)) }

    static func reason(_ status: Int) -> String {
        switch status {
        case 200: return "OK"
        case 201: return "Created"
        case 204: return "No Content"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 413: return "Payload Too Large"
        case 415: return "Unsupported Media Type"
        case 429: return "Too Many Requests"
        case 500: return "Internal Server Error"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        default: return "Status"
        }
    }
}

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

    public static func invalidRequest(_ message: String) -> HTTPError { HTTPError(status: 400, code: "invalid_request", message: message) }
    public static let unauthorized = HTTPError(status: 401, code: "unauthorized", message: "a live X-Weather-Session-Token or a valid X-Weather-Token is required")
    /// 401 for a weather request, with why (`AuthRefusal`). Once the legacy path is off, an old
    /// app's `X-Weather-Token` is told so, and no answer speaks of "a valid X-Weather-Token".
    public static func unauthorized(_ refusal: AuthRefusal, legacyPathOn: Bool) -> HTTPError {
        var error = switch (refusal, legacyPathOn) {
        case (.legacyOff, _):
            HTTPError(status: 401, code: "unauthorized", message: "this gateway no longer accepts X-Weather-Token; update the app (it creates an anonymous session, POST /v1/weather/session)")
        case (_, false):
            HTTPError(status: 401, code: "unauthorized", message: "a live X-Weather-Session-Token is required")
        default:
            unauthorized
        }
        error.reason = refusal.rawValue
        return error
    }
    public static let invalidRefreshToken = HTTPError(status: 401, code: "invalid_refresh_token", message: "the refresh token is unknown, expired, revoked or belongs to another session")
    public static let refreshTokenReused = HTTPError(status: 401, code: "refresh_token_reused", message: "this refresh token was already used; the session is revoked, create a new one")
    public static let notFound = HTTPError(status: 404, code: "not_found", message: "no such route")
    public static let payloadTooLarge = HTTPError(status: 413, code: "payload_too_large", message: "the body is larger than 4096 bytes")
    public static let unsupportedMediaType = HTTPError(status: 415, code: "unsupported_media_type", message: "send the body as application/json")
    public static let storageUnavailable = HTTPError(status: 503, code: "storage_unavailable", message: "the database is not available right now; try again shortly")
    public static let internalError = HTTPError(status: 500, code: "internal_error", message: "something went wrong on our side")
    public static let providerError = HTTPError(status: 502, code: "provider_error", message: "the weather provider failed; try again later")
    /// Every provider skipped the request for its dates or answered without them: a retry
    /// cannot help, so the message does not suggest one (API.md names no code of its own).
    public static let daysNotCovered = HTTPError(status: 502, code: "provider_error", message: "the weather providers of this gateway do not cover the days asked")
    public static let providerTimeout = HTTPError(status: 504, code: "provider_timeout", message: "the weather provider did not answer in time")
    /// 429 from the quota named `limit` (the prefix of its bucket key, as `limited.<limit>` counts it).
    public static func rateLimited(retryAfter: Int64, limit: String) -> HTTPError {
        HTTPError(status: 429, code: "rate_limited", message: "too many requests; retry after \(retryAfter) seconds", headers: ["Retry-After": "\(retryAfter)"], reason: limit)
    }
    public static func methodNotAllowed(_ allow: [String]) -> HTTPError {
        HTTPError(status: 405, code: "method_not_allowed", message: "use \(allow.joined(separator: " or ")) on this route", headers: ["Allow": allow.joined(separator: ", ")])
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

extension Array where Element == UInt8 {
    /// Appends a string's UTF-8 bytes with one copy (`+= s.utf8` walks an iterator).
    mutating func appendUTF8(_ s: String) {
        var s = s
        s.withUTF8 { append(contentsOf: $0) }
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
