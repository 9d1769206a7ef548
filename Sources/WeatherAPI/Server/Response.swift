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

    /// A JSON response with the content type API.md names. Its headers are one array with room
    /// for the two `Gateway` adds to every answer (a literal joined to `headers`, then grown by
    /// those two, was three or four allocations).
    public static func json(_ status: Int, _ body: [UInt8], headers: [(name: String, value: String)] = []) -> Response {
        var all: [(name: String, value: String)] = []
        all.reserveCapacity(headers.count + 3)
        all.append(("Content-Type", "application/json; charset=utf-8"))
        all.append(contentsOf: headers)
        return Response(status: status, headers: all, body: body)
    }

    /// Headers of every response that carries a token (RFC 6749 §5.1).
    public static let noStore: [(name: String, value: String)] = [("Cache-Control", "no-store"), ("Pragma", "no-cache")]

    /// The bytes a CGI/FastCGI responder writes: `Status:` line, headers, blank line, body.
    public func cgiBytes(includeBody: Bool = true) -> [UInt8] {
        var out = cgiHead(reserving: includeBody ? body.count : 0)
        if includeBody { out += body }
        return out
    }

    /// The `Status:` line, headers and blank line, in one buffer of exactly their size (plus
    /// `extra` bytes of room: `cgiBytes` puts the body there), written in one pass: this runs for
    /// every response, and appending piece by piece to a growing array cost about 4,600
    /// instructions a cached weather answer (callgrind, session 27). A FastCGI server writes the
    /// body after it without copying it in here.
    public func cgiHead(reserving extra: Int = 0) -> [UInt8] {
        let reason = Response.reason(status)
        // A 204 carries no Content-Length (RFC 9110 §8.6: a server must not send one), which the
        // revoke's 204 did, through nginx and Apache alike.
        let sendsLength = status != 204
        var size = 8 + ByteWriter.decimalCount(status) + 1 + reason.utf8.count + 2 + 2  // "Status: " … "\r\n" … "\r\n"
        for h in headers { size += h.name.utf8.count + 2 + h.value.utf8.count + 2 }
        if sendsLength { size += 16 + ByteWriter.decimalCount(body.count) + 2 }  // "Content-Length: " … "\r\n"
        return [UInt8](unsafeUninitializedCapacity: size + extra) { buffer, initialized in
            var w = ByteWriter(buffer)
            // The two-byte separators as bytes: a string's bytes cost a look-up and a copy each.
            func lineEnd() {
                w.write(byte: UInt8(ascii: "\r"))
                w.write(byte: UInt8(ascii: "\n"))
            }
            w.write("Status: ")
            w.write(decimal: status)
            w.write(byte: UInt8(ascii: " "))
            w.write(reason)
            lineEnd()
            for i in headers.indices {
                w.write(headers[i].name)
                w.write(byte: UInt8(ascii: ":"))
                w.write(byte: UInt8(ascii: " "))
                w.write(headers[i].value)
                lineEnd()
            }
            if sendsLength {
                w.write("Content-Length: ")
                w.write(decimal: body.count)
                lineEnd()
            }
            lineEnd()
            initialized = w.count
        }
    }

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
