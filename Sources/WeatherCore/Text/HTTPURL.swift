/// An `http` or `https` URL, read the one way both of its readers need: the configuration (the
/// providers' base URLs, `ConfigLoader`) and the provider HTTP client (`HTTPTarget`), so a base
/// URL the configuration accepts is one the client can fetch, and a typo stops start-up instead
/// of failing every provider call.
///
/// Accepted: `http://` or `https://` (any case), a host (a name of letters, digits, `-`, `.` and
/// `_` with no empty label, an IPv4 address as four numbers up to 255, or an IPv6 address in
/// brackets), an optional port 1...65535, an optional
/// path, and (not in a base) a query. Refused: any other scheme, user info (`user:pw@host`),
/// a fragment, spaces, control characters and non-ASCII bytes (the request line is ASCII; an
/// international host name goes in its `xn--` form), and a `%` not followed by two hex digits.
public struct HTTPURL: Sendable, Equatable {
    /// `https`, else `http`.
    public var tls: Bool
    /// The host as written, without the brackets of an IPv6 literal.
    public var host: String
    /// The port as written; nil: the scheme's (80 or 443).
    public var explicitPort: Int?
    /// Empty, or from the first `/` up to the query.
    public var path: String
    /// What follows `?`, without it; nil when there is no `?`.
    public var query: String?

    /// The port to connect to.
    public var port: Int { explicitPort ?? (tls ? 443 : 80) }

    /// The URL as text: the scheme in lowercase, the rest as written.
    public var text: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "https" : "http")://\(name)\(explicitPort.map { ":\($0)" } ?? "")\(path)\(query.map { "?\($0)" } ?? "")"
    }

    /// Why a text is not such a URL; `description` completes "the URL ...", naming the part
    /// without repeating it (a base URL holds no key, but a key pasted into one would).
    public enum Problem: Error, Equatable, CustomStringConvertible {
        case scheme
        case userInfo
        case host
        case port
        case character
        case fragment
        case query

        public var description: String {
            switch self {
            case .scheme: "does not start with http:// or https://"
            case .userInfo: "has a user name or password (user@host), which the client does not send"
            case .host: "has no host, or one that is not a host name, an IPv4 address or an IPv6 address in brackets"
            case .port: "has a port that is not a number in 1...65535"
            case .character: "holds a space, a control character, a non-ASCII character or a % that is not a %XX escape"
            case .fragment: "has a fragment (#...), which is never sent"
            case .query: "has a query (?...): the gateway adds its own to the base"
            }
        }
    }

    /// A full URL, as the client fetches it: path and query allowed, no fragment.
    public static func parse(_ text: String) throws(Problem) -> HTTPURL {
        let bytes = Array(text.utf8)
        let rest: ArraySlice<UInt8>
        let tls: Bool
        if startsCaseless(bytes, with: "https://") {
            tls = true
            rest = bytes[8...]
        } else if startsCaseless(bytes, with: "http://") {
            tls = false
            rest = bytes[7...]
        } else {
            throw .scheme
        }
        // Spaces and control characters would split the request line.
        guard !rest.contains(where: { $0 <= 32 || $0 >= 127 }) else { throw .character }
        guard !rest.contains(UInt8(ascii: "#")) else { throw .fragment }
        let authorityEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains(UInt8(ascii: "@")) else { throw .userInfo }

        var hostPart = authority
        var portPart: ArraySlice<UInt8>?
        let ipv6 = authority.first == UInt8(ascii: "[")
        if ipv6 {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { throw .host }
            hostPart = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { throw .host }
                portPart = after.dropFirst()
            }
            guard hostPart.count(where: { $0 == UInt8(ascii: ":") }) >= 2,
                hostPart.allSatisfy({ Hex.value(ofDigit: $0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { throw .host }
        } else {
            if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
                hostPart = authority[..<colon]
                portPart = authority[(colon + 1)...]
            }
            guard hostPart.allSatisfy(isHostNameByte), isHostName(hostPart) else { throw .host }
        }
        guard !hostPart.isEmpty else { throw .host }

        var explicitPort: Int?
        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5, portPart.allSatisfy({ (48...57).contains($0) }) else { throw .port }
            let value = portPart.reduce(0) { $0 * 10 + Int($1 - 48) }
            guard (1...65535).contains(value) else { throw .port }
            explicitPort = value
        }

        let target = rest[authorityEnd...]
        let queryStart = target.firstIndex(of: UInt8(ascii: "?"))
        let pathPart = target[..<(queryStart ?? target.endIndex)]
        let queryPart = queryStart.map { target[($0 + 1)...] }
        guard validEscapes(pathPart, allowing: isPathByte), validEscapes(queryPart ?? [], allowing: { isPathByte($0) || $0 == UInt8(ascii: "?") }) else {
            throw .character
        }
        return HTTPURL(
            tls: tls, host: String(decoding: hostPart, as: UTF8.self), explicitPort: explicitPort,
            path: String(decoding: pathPart, as: UTF8.self), query: queryPart.map { String(decoding: $0, as: UTF8.self) })
    }

    /// A base URL, to which a provider appends its own path and query: `parse`, without a query,
    /// and without trailing slashes on the path (`https://host/` and `https://host` are one base).
    public static func parseBase(_ text: String) throws(Problem) -> HTTPURL {
        var url = try parse(text)
        guard url.query == nil else { throw .query }
        while url.path.hasSuffix("/") { url.path.removeLast() }
        return url
    }

    /// A byte a path may hold as it is (RFC 3986 `pchar` and `/`, without `%`, which only starts
    /// an escape): letters, digits and `-._~!$&'()*+,;=:@/`.
    static func isPathByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: "-._~!$&'()*+,;=:@/".utf8.contains(c)
        }
    }

    /// Labels of host-name bytes, none empty; when every label is digits, an IPv4 address of four
    /// numbers up to 255 (`999.1.1.1` or `10.1` would be a typo, or an address the resolver reads
    /// otherwise than it looks).
    static func isHostName(_ host: ArraySlice<UInt8>) -> Bool {
        let labels = host.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard !labels.contains(where: \.isEmpty) else { return false }
        guard labels.allSatisfy({ $0.allSatisfy { (48...57).contains($0) } }) else { return true }
        return labels.count == 4 && labels.allSatisfy { $0.count <= 3 && $0.reduce(0) { $0 * 10 + Int($1 - 48) } <= 255 }
    }

    static func isHostNameByte(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        default: c == UInt8(ascii: "-") || c == UInt8(ascii: ".") || c == UInt8(ascii: "_")
        }
    }

    /// Every byte allowed, or a `%` followed by two hex digits.
    static func validEscapes(_ bytes: some Collection<UInt8>, allowing allowed: (UInt8) -> Bool) -> Bool {
        var i = bytes.startIndex
        while i != bytes.endIndex {
            if bytes[i] == UInt8(ascii: "%") {
                let first = bytes.index(after: i)
                guard first != bytes.endIndex, Hex.value(ofDigit: bytes[first]) != nil else { return false }
                let second = bytes.index(after: first)
                guard second != bytes.endIndex, Hex.value(ofDigit: bytes[second]) != nil else { return false }
                i = bytes.index(after: second)
            } else {
                guard allowed(bytes[i]) else { return false }
                i = bytes.index(after: i)
            }
        }
        return true
    }

    /// Whether `bytes` start with `prefix` (lowercase), its letters in either case.
    static func startsCaseless(_ bytes: [UInt8], with prefix: String) -> Bool {
        bytes.count >= prefix.utf8.count
            && zip(bytes, prefix.utf8).allSatisfy { byte, expected in
                byte == expected || ((97...122).contains(expected) && byte == expected - 32)
            }
    }
}
