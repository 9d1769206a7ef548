/// Which address a request is counted against.
public enum ClientAddress {
    /// What per-IP quotas count under: the client (see `client`), but for IPv6 its whole /64
    /// (`2001:db8:0:1::/64`). One subscriber usually holds a whole /64 (RFC 6177) and could rotate
    /// through its addresses to multiply every per-IP quota; IPv4 addresses count one by one.
    public static func quotaKey(remoteAddr: String, forwardedFor: String?, trusted: [CIDR]) -> String {
        // Every request comes here; most from a peer that is the client, in the dotted form
        // `IPAddress.description` writes, which is then the key as it is (parsing it into bytes
        // and writing it back were about 2,000 instructions and three allocations a request).
        if trusted.isEmpty || forwardedFor == nil, isCanonicalIPv4(remoteAddr) { return remoteAddr }
        guard let peer = IPAddress(remoteAddr) else { return remoteAddr.isEmpty ? "unknown" : String(remoteAddr.prefix(64)) }
        let client = client(peer: peer, forwardedFor: forwardedFor, trusted: trusted)
        guard !client.isV4 else { return client.description }
        var prefix = ""
        for i in stride(from: 0, to: 8, by: 2) {
            prefix += String(UInt16(client.bytes[i]) << 8 | UInt16(client.bytes[i + 1]), radix: 16) + ":"
        }
        return prefix + ":/64"
    }

    /// Dotted IPv4 as `IPAddress.description` writes it: four parts of 0–255 without leading zeros.
    static func isCanonicalIPv4(_ text: String) -> Bool {
        var parts = 0, value = 0, digits = 0, leadingZero = false
        for c in text.utf8 {
            if c >= 48 && c <= 57 {
                if digits == 0 { leadingZero = c == 48 } else if leadingZero { return false }
                value = value * 10 + Int(c - 48)
                digits += 1
                guard value <= 255 else { return false }
            } else if c == UInt8(ascii: "."), digits > 0, parts < 3 {
                parts += 1
                value = 0
                digits = 0
            } else {
                return false
            }
        }
        return digits > 0 && parts == 3
    }

    /// `REMOTE_ADDR`, unless the peer is a trusted proxy: then the right-most `X-Forwarded-For` hop
    /// that is not itself trusted (hops left of it could be written by anyone).
    static func client(peer: IPAddress, forwardedFor: String?, trusted: [CIDR]) -> IPAddress {
        guard !trusted.isEmpty, let xff = forwardedFor, isTrusted(peer, trusted) else { return peer }
        var candidate = peer
        for hop in xff.split(separator: ",").reversed() {
            guard let addr = IPAddress(hop.trimmingSpaces()) else { break }
            candidate = addr
            if !isTrusted(addr, trusted) { break }
        }
        return candidate
    }

    static func isTrusted(_ a: IPAddress, _ trusted: [CIDR]) -> Bool { trusted.contains { $0.contains(a) } }
}
