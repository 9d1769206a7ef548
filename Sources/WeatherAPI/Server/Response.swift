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

extension Array where Element == UInt8 {
    /// Appends a string's UTF-8 bytes with one copy (`+= s.utf8` walks an iterator).
    mutating func appendUTF8(_ s: String) {
        var s = s
        s.withUTF8 { append(contentsOf: $0) }
    }
}
