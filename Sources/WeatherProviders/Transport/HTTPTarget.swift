/// The parts of an `http` or `https` URL a GET needs; anything else (other schemes, user info,
/// a missing host, a port out of range) is refused, so a crafted base URL cannot reach a file or
/// another protocol.
struct HTTPTarget: Equatable, Sendable {
    var tls: Bool
    /// The host as written, without the brackets of an IPv6 literal.
    var host: String
    var port: Int
    /// What goes after `GET `: the path and the query, `/` when the URL has neither.
    var requestTarget: String

    /// Where a kept-alive connection may be reused: scheme, host and port.
    var origin: String { "\(tls ? "https" : "http")://\(hostHeader)" }

    /// The `Host` header: the port only when it is not the scheme's default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (tls ? 443 : 80) ? name : "\(name):\(port)"
    }

    init?(_ url: String) {
        let bytes = Array(url.utf8)
        let rest: ArraySlice<UInt8>
        if bytes.starts(with: "https://".utf8) {
            tls = true
            rest = bytes[8...]
        } else if bytes.starts(with: "http://".utf8) {
            tls = false
            rest = bytes[7...]
        } else {
            return nil
        }
        // Control characters and spaces would split the request line; a fragment is never sent.
        guard !rest.contains(where: { $0 <= 32 || $0 == 127 || $0 == UInt8(ascii: "#") }) else { return nil }
        let authorityEnd = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return nil }

        var hostPart = authority[...]
        var portPart: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostPart = authority[(authority.startIndex + 1)..<close]
            let after = authority[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { return nil }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostPart = authority[..<colon]
            portPart = authority[(colon + 1)...]
        }
        guard !hostPart.isEmpty else { return nil }
        host = String(decoding: hostPart, as: UTF8.self)

        if let portPart {
            guard !portPart.isEmpty, portPart.count <= 5,
                portPart.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
            else { return nil }
            let value = portPart.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            guard (1...65535).contains(value) else { return nil }
            port = value
        } else {
            port = tls ? 443 : 80
        }

        let target = rest[authorityEnd...]
        if target.isEmpty {
            requestTarget = "/"
        } else if target.first == UInt8(ascii: "?") {
            requestTarget = "/" + String(decoding: target, as: UTF8.self)
        } else {
            requestTarget = String(decoding: target, as: UTF8.self)
        }
    }
}
