/// Which address a request is counted against.
public enum ClientAddress {
    /// What per-IP quotas count under: the client (see `client`), but for IPv6 its whole /64
    /// (`2001:db8:0:1::/64`). One subscriber usually holds a whole /64 (RFC 6177) and could rotate
    /// through its addresses to multiply every per-IP quota; IPv4 addresses count one by one.
    public static func quotaKey(remoteAddr: String, forwardedFor: String?, trusted: [CIDR]) -> String {
        guard let peer = IPAddress(remoteAddr) else { return remoteAddr.isEmpty ? "unknown" : String(remoteAddr.prefix(64)) }
        let client = client(peer: peer, forwardedFor: forwardedFor, trusted: trusted)
        guard !client.isV4 else { return client.description }
        var prefix = ""
        for i in stride(from: 0, to: 8, by: 2) {
            prefix += String(UInt16(client.bytes[i]) << 8 | UInt16(client.bytes[i + 1]), radix: 16) + ":"
        }
        return prefix + ":/64"
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
