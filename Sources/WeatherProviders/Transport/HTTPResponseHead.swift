/// The status line and the few headers of an HTTP/1.x response that decide how to read its body
/// and whether its connection can serve the next call.
struct HTTPResponseHead: Equatable, Sendable {
    /// How the body's end is found (RFC 9112, section 6.3).
    enum Framing: Equatable, Sendable {
        case none
        case length(Int)
        case chunked
        case untilClose
    }

    var status: Int
    var retryAfterSeconds: Int?
    var framing: Framing
    /// `Content-Encoding: gzip` (the only coding the transport asks for).
    var gzip: Bool
    /// HTTP/1.1 without `Connection: close`; the connection may carry the next request.
    var keepAlive: Bool

    /// Where the head ends: the index just past the blank line, or nil while it is incomplete.
    static func end(in bytes: ArraySlice<UInt8>) -> Int? {
        var i = bytes.startIndex
        while i + 3 < bytes.endIndex {
            if bytes[i] == 13 && bytes[i + 1] == 10 && bytes[i + 2] == 13 && bytes[i + 3] == 10 { return i + 4 }
            i += 1
        }
        return nil
    }

    /// Parses a complete head (status line and header lines, up to and including the blank
    /// line); nil when it is not HTTP/1.x or its framing is contradictory or unsupported.
    init?(_ head: ArraySlice<UInt8>) {
        var lines = head.split(separator: 10, omittingEmptySubsequences: true).map { line in
            line.last == 13 ? line.dropLast() : line
        }.filter { !$0.isEmpty }[...]
        guard let statusLine = lines.popFirst(), statusLine.count >= 12,
            statusLine.starts(with: "HTTP/1.".utf8)
        else { return nil }
        let minor = statusLine[statusLine.startIndex + 7]
        let code = statusLine[(statusLine.startIndex + 9)..<(statusLine.startIndex + 12)]
        guard statusLine[statusLine.startIndex + 8] == 32,
            code.allSatisfy({ $0 >= 48 && $0 <= 57 })
        else { return nil }
        status = code.reduce(0) { $0 * 10 + Int($1 - 48) }
        guard status >= 100 else { return nil }

        var contentLength: Int?
        var chunked = false
        var close = minor != UInt8(ascii: "1")
        retryAfterSeconds = nil
        gzip = false
        for line in lines {
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return nil }
            let name = Self.lowercased(line[..<colon])
            let value = Self.trimmed(line[(colon + 1)...])
            switch name {
            case "content-length":
                guard !value.isEmpty, value.count <= 15, value.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
                let length = value.reduce(0) { $0 * 10 + Int($1 - 48) }
                // Two different lengths are a smuggling attempt or a broken server (RFC 9112 6.3).
                if let contentLength, contentLength != length { return nil }
                contentLength = length
            case "transfer-encoding":
                let codings = Self.tokens(value)
                guard codings.last == "chunked", codings.allSatisfy({ $0 == "chunked" || $0 == "identity" }) else { return nil }
                chunked = true
            case "connection":
                if Self.tokens(value).contains("close") { close = true }
            case "content-encoding":
                for coding in Self.tokens(value) {
                    switch coding {
                    case "gzip", "x-gzip": gzip = true
                    case "identity": break
                    default: return nil
                    }
                }
            case "retry-after":
                retryAfterSeconds = Self.deltaSeconds(value)
            default:
                break
            }
        }

        if status < 200 || status == 204 || status == 304 {
            framing = .none
        } else if chunked {
            framing = .chunked  // Transfer-Encoding wins over Content-Length (RFC 9112 6.3)
        } else if let contentLength {
            framing = .length(contentLength)
        } else {
            framing = .untilClose
            close = true
        }
        keepAlive = !close
    }

    /// The delta-seconds form only; an HTTP-date would need a clock and a date parser for a hint.
    static func deltaSeconds(_ digits: ArraySlice<UInt8>) -> Int? {
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 48) }
    }

    private static func lowercased(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }, as: UTF8.self)
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isSpace: (UInt8) -> Bool = { $0 == 32 || $0 == 9 }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }),
            let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return [] }
        return bytes[first...last]
    }

    /// A comma-separated header value as lower-case tokens.
    private static func tokens(_ value: ArraySlice<UInt8>) -> [String] {
        value.split(separator: UInt8(ascii: ",")).map { lowercased(trimmed($0)) }.filter { !$0.isEmpty }
    }
}
