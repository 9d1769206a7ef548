import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// One HTTP request, as the web server described it to us. Built once, by `Request.parse`.
public struct Request: Sendable {
    public var method: String
    /// Path below the mount prefix, percent-decoded, e.g. `/v1/weather`.
    public var path: String
    /// Other spellings of the path (from `SCRIPT_NAME` + `PATH_INFO`), tried when `path` matches no route.
    public var alternatePaths: [String] = []
    /// Decoded query parameters in order; duplicates kept so validation can refuse them.
    public var query: [(name: String, value: String)]
    /// Header names lowercased with `-` (`x-weather-session-token`).
    public var headers: HeaderFields
    public var remoteAddr: String
    public var body: [UInt8]

    public init(
        method: String, path: String, query: [(name: String, value: String)] = [], headers: HeaderFields = [:], remoteAddr: String = "127.0.0.1",
        body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.remoteAddr = remoteAddr
        self.body = body
    }

    /// The only value of query parameter `name`; throws when it is given twice.
    public func queryValue(_ name: String) throws(HTTPError) -> String? {
        var found: String?
        for item in query where item.name == name {
            if found != nil { throw HTTPError.invalidRequest("parameter \(name) is given more than once") }
            found = item.value
        }
        return found
    }

    /// The largest body the gateway reads (API.md: 4 KiB).
    public static let maxBodyBytes = 4096

    /// Turns CGI/FastCGI parameters into a `Request`: the one place that knows the web server's
    /// conventions. `readBody(n)` reads up to `n` bytes of the body and returns what it got.
    ///
    /// The path comes from `REQUEST_URI` (nginx, Apache) or else `SCRIPT_NAME` + `PATH_INFO`
    /// (CGI, Apache rewrites), minus `mountPrefix`. Errors are the 4xx answers API.md asks for.
    public static func parse(
        params: CGIParameters, mountPrefix: String, readBody: (Int) -> [UInt8]
    ) throws(HTTPError) -> Request {
        guard let method = params["REQUEST_METHOD"], !method.isEmpty, method.utf8.count <= 16,
            method.utf8.allSatisfy({ (65...90).contains($0) })
        else {
            throw HTTPError(status: 400, code: "invalid_request", message: "the request has no valid method")
        }
        // The spellings of the path, the first one the path: nginx gives only REQUEST_URI, so the
        // others are kept in an array only when there are others (an array is an allocation).
        var first: String?
        var others: [String] = []
        func candidate(_ raw: String) {
            if first == nil { first = raw } else { others.append(raw) }
        }
        var rawQuery = params["QUERY_STRING"] ?? ""
        if var uri = params["REQUEST_URI"], !uri.isEmpty {
            // Split at the first `?` on the bytes (`memchr`), not by walking `String` indices.
            let split = uri.withUTF8 { all -> (path: String, query: String?)? in
                guard let base = all.baseAddress, let mark = memchr(base, Int32(UInt8(ascii: "?")), all.count) else { return nil }
                let q = UnsafeRawPointer(mark) - UnsafeRawPointer(base)
                let path = String(decoding: UnsafeBufferPointer(rebasing: all[..<q]), as: UTF8.self)
                return (path, rawQuery.isEmpty ? String(decoding: UnsafeBufferPointer(rebasing: all[(q + 1)...]), as: UTF8.self) : nil)
            }
            if let split {
                candidate(split.path)
                if let query = split.query { rawQuery = query }
            } else {
                candidate(uri)
            }
        }
        let scriptName = params["SCRIPT_NAME"] ?? ""
        let pathInfo = params["PATH_INFO"] ?? ""
        if !scriptName.isEmpty || !pathInfo.isEmpty { candidate(scriptName + pathInfo) }
        if !pathInfo.isEmpty { candidate(pathInfo) }

        func decoded(_ raw: String) throws(HTTPError) -> String {
            guard let decoded = percentDecode(raw, plusIsSpace: false) else {
                throw HTTPError.invalidRequest("the path is not valid UTF-8")
            }
            return strip(prefix: mountPrefix, from: decoded)
        }
        let path = try decoded(first ?? "/")
        var alternatePaths: [String] = []
        for raw in others { alternatePaths.append(try decoded(raw)) }
        guard !hasNULOrReplacement(path) else {
            throw HTTPError.invalidRequest("the path is not valid UTF-8")
        }

        let query = try parseQuery(rawQuery)

        var headers = HeaderFields()
        // The first byte sorts out most names; the kept ones have their header names made once.
        for (key, value) in params where key.utf8.first == UInt8(ascii: "H") {
            if let known = knownHeaderName(key) {
                headers[known] = value
            } else if key.utf8.starts(with: "HTTP_".utf8) {
                headers[headerName(cgiName: key)] = value
            }
        }
        if let ct = params["CONTENT_TYPE"], !ct.isEmpty { headers["content-type"] = ct }

        var body: [UInt8] = []
        switch bodyFraming(params) {
        case .none:
            break
        case .invalidLength:
            throw HTTPError.invalidRequest("Content-Length is not a number")
        case .length(let length):
            guard length <= maxBodyBytes else { throw HTTPError.payloadTooLarge }
            if length > 0 {
                body = readBody(length)
                guard body.count == length else {
                    throw HTTPError.invalidRequest("the body is shorter than its Content-Length")
                }
            }
        case .toItsEnd:
            // One byte past the limit at most. A body that stops coming before its end is taken
            // as it stands when the wait runs out (the reader cannot tell that from its end).
            body = readBody(maxBodyBytes + 1)
            guard body.count <= maxBodyBytes else { throw HTTPError.payloadTooLarge }
        }
        var request = Request(
            method: method, path: path, query: query, headers: headers,
            remoteAddr: params["REMOTE_ADDR"] ?? "", body: body)
        request.alternatePaths = alternatePaths
        return request
    }

    /// How the web server says where a request's body ends.
    public enum BodyFraming: Equatable, Sendable {
        /// No body.
        case none
        /// `CONTENT_LENGTH` bytes.
        case length(Int)
        /// A `CONTENT_LENGTH` that is not a length (400).
        case invalidLength
        /// No `CONTENT_LENGTH` but a `Transfer-Encoding`: Apache's plain CGI passes a chunked body
        /// on decoded that way and ends standard input after it (RFC 3875 would have the length
        /// set; nginx and mod_fcgid, which buffer bodies, set it), so it is read to its end.
        case toItsEnd
    }

    /// The body's framing as `params` give it: the one reading of it, for `parse` and for the
    /// plain-CGI runtime's drain of a body the handler left unread.
    public static func bodyFraming(_ params: CGIParameters) -> BodyFraming {
        if let text = params["CONTENT_LENGTH"], !text.isEmpty {
            guard text.utf8.count <= 18, let length = Int(text), length >= 0 else { return .invalidLength }
            return .length(length)
        }
        if let coding = params["HTTP_TRANSFER_ENCODING"], !coding.isEmpty { return .toItsEnd }
        return .none
    }

    /// Every query parameter a route reads (`WeatherParameters`; a test asks each). A badly
    /// encoded value of one of these is refused naming it; any other name might be a secret and
    /// is not repeated (`parseQuery`; a security re-audit).
    static let namesTheRoutesRead: Set<String> = ["lat", "lon", "days", "start", "end"]

    /// The parameters `parse` and `Gateway.handle` read. A FastCGI server may drop every other
    /// one before building the dictionary (web servers send thirty or so per request).
    public static let parameterNames = [
        "REQUEST_METHOD", "REQUEST_URI", "QUERY_STRING", "SCRIPT_NAME", "PATH_INFO", "CONTENT_TYPE",
        "CONTENT_LENGTH", "REMOTE_ADDR", "HTTP_X_REQUEST_ID", "HTTP_X_FORWARDED_FOR",
        "HTTP_X_WEATHER_SESSION_TOKEN", "HTTP_X_WEATHER_TOKEN", "HTTP_TRANSFER_ENCODING",
    ]

    /// The `HTTP_` names of `parameterNames` with their header names (`x-weather-token`), made
    /// once: converting each name on every request cost about 1,400 instructions of a cached
    /// request's 58,000 (callgrind, session 29), and a FastCGI server that keeps only
    /// `parameterNames` hands over these very strings.
    static let knownHeaderNames: [(cgi: String, header: String)] =
        parameterNames.filter { $0.hasPrefix("HTTP_") }.map { ($0, headerName(cgiName: $0)) }

    /// The header name of a kept `HTTP_` parameter, or nil for any other name.
    static func knownHeaderName(_ cgiName: String) -> String? {
        let length = cgiName.utf8.count
        for known in knownHeaderNames where known.cgi.utf8.count == length && known.cgi == cgiName { return known.header }
        return nil
    }

    /// A NUL byte, or (with `replacementToo`) U+FFFD (EF BF BD), which marks bytes that were not
    /// UTF-8. Over the string's own bytes: it runs on the path and on every query name and value.
    static func hasNULOrReplacement(_ text: String, replacementToo: Bool = true) -> Bool {
        var text = text
        return text.withUTF8 { u in
            var i = 0
            while i < u.count {
                let c = u[i]
                if c == 0 { return true }
                if replacementToo, c == 0xEF, i + 2 < u.count, u[i + 1] == 0xBF, u[i + 2] == 0xBD { return true }
                i += 1
            }
            return false
        }
    }

    static func strip(prefix: String, from path: String) -> String {
        guard !prefix.isEmpty, path.hasPrefix(prefix) else { return path }
        let rest = String(path.dropFirst(prefix.count))
        return rest.isEmpty ? "/" : (rest.hasPrefix("/") ? rest : path)
    }

    /// `a=1&b=2` into decoded pairs, in order, on bytes; empty pairs are skipped. A pair whose
    /// escapes are malformed, or that is not UTF-8 or holds NUL once decoded, is 400 naming its
    /// parameter when a route reads it (API.md: the message names the field), else the query
    /// string.
    static func parseQuery(_ raw: String) throws(HTTPError) -> [(name: String, value: String)] {
        var raw = raw
        var refused: String?
        let pairs = raw.withUTF8 { all -> [(name: String, value: String)]? in
            var out: [(name: String, value: String)] = []
            if !all.isEmpty { out.reserveCapacity(4) }  // a route reads two to four; one allocation
            var start = 0
            while start <= all.count {
                var end = start
                while end < all.count, all[end] != UInt8(ascii: "&") { end += 1 }
                if end > start {
                    var eq = start
                    while eq < end, all[eq] != UInt8(ascii: "=") { eq += 1 }
                    let name = UnsafeBufferPointer(rebasing: all[start..<eq])
                    let value = eq < end ? UnsafeBufferPointer(rebasing: all[(eq + 1)..<end]) : UnsafeBufferPointer(start: nil, count: 0)
                    guard let n = percentDecode(bytes: name, plusIsSpace: true), !hasNULOrReplacement(n, replacementToo: false) else { return nil }
                    guard let v = percentDecode(bytes: value, plusIsSpace: true), !hasNULOrReplacement(v, replacementToo: false) else {
                        refused = n
                        return nil
                    }
                    out.append((n, v))
                }
                start = end + 1
            }
            return out
        }
        guard let pairs else {
            // Only a parameter some route reads is named: any other name might be a secret (the
            // legacy token as a name came back in the error body; a security re-audit).
            if let name = refused, Self.namesTheRoutesRead.contains(name) {
                throw HTTPError.invalidRequest("parameter \(name) is not valid percent-encoded UTF-8 without NUL")
            }
            throw HTTPError.invalidRequest("the query string is not valid percent-encoded UTF-8 without NUL")
        }
        return pairs
    }

    /// `%XX` decoding; `nil` when the escapes are malformed or the result is not UTF-8.
    static func percentDecode(_ text: some StringProtocol, plusIsSpace: Bool) -> String? {
        var s = String(text)
        return s.withUTF8 { percentDecode(bytes: $0, plusIsSpace: plusIsSpace) }
    }

    static func percentDecode(bytes u: UnsafeBufferPointer<UInt8>, plusIsSpace: Bool) -> String? {
        guard u.contains(37) || (plusIsSpace && u.contains(43)) else { return validUTF8String(u) }
        var out: [UInt8] = []
        out.reserveCapacity(u.count)
        var i = 0
        while i < u.count {
            if u[i] == 37 {
                guard i + 2 < u.count, let h = Hex.value(ofDigit: u[i + 1]), let l = Hex.value(ofDigit: u[i + 2]) else { return nil }
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(plusIsSpace && u[i] == 43 ? 32 : u[i])
                i += 1
            }
        }
        return out.withUnsafeBufferPointer(validUTF8String)
    }
}

/// `HTTP_X_WEATHER_TOKEN` → `x-weather-token`, on bytes.
func headerName(cgiName key: String) -> String {
    var key = key
    return key.withUTF8 { all in
        let name = UnsafeBufferPointer(rebasing: all[min(5, all.count)...])
        return String(unsafeUninitializedCapacity: name.count) { out in
            for (i, c) in name.enumerated() {
                out[i] = c == UInt8(ascii: "_") ? UInt8(ascii: "-") : (c >= 65 && c <= 90 ? c + 32 : c)
            }
            return name.count
        }
    }
}
