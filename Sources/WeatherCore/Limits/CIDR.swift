/// An address block such as `10.0.0.0/8` or `2001:db8::/32`.
public struct CIDR: Sendable, Equatable {
    public let network: IPAddress
    public let prefixLength: Int

    /// Parses `ADDRESS/LEN` or a bare address (a single host).
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let addr = IPAddress(parts[0]) else { return nil }
        // Written as IPv6 (even `::ffff:0:0/96`), the length counts 128 bits; as IPv4, 32.
        let writtenAsV6 = parts[0].contains(":")
        let maxLen = writtenAsV6 ? 128 : 32
        var len = maxLen
        if parts.count == 2 {
            guard let n = Int(parts[1]), (0...maxLen).contains(n) else { return nil }
            len = n
        }
        network = addr
        prefixLength = writtenAsV6 ? len : len + 96
    }

    /// True when `address` lies inside this block.
    public func contains(_ address: IPAddress) -> Bool {
        var bits = prefixLength
        var i = 0
        while bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xff : ~(0xff >> UInt8(bits))
            if address.bytes[i] & mask != network.bytes[i] & mask { return false }
            bits -= 8
            i += 1
        }
        return true
    }
}
