/// An IP address as 16 bytes (IPv4 mapped into `::ffff:0:0/96`), for prefix matching.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    public let bytes: [UInt8]
    public let isV4: Bool

    /// Parses dotted IPv4 or RFC 4291 IPv6 text (`::`, embedded IPv4, zone ids refused).
    public init?(_ text: some StringProtocol) {
        let s = String(text)
        if let v4 = IPAddress.parseV4(Substring(s)) {
            bytes = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] + v4
            isV4 = true
            return
        }
        guard let v6 = IPAddress.parseV6(s) else { return nil }
        bytes = v6
        isV4 = v6[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])
    }

    /// Dotted decimal, on bytes (this runs for every request's `REMOTE_ADDR`): four parts of one
    /// to three digits, each at most 255.
    static func parseV4(_ s: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(4)
        var value = 0, digits = 0
        for c in s.utf8 {
            if c >= 48 && c <= 57 {
                value = value * 10 + Int(c - 48)
                digits += 1
                guard digits <= 3, value <= 255 else { return nil }
            } else if c == UInt8(ascii: ".") {
                guard digits > 0, out.count < 3 else { return nil }
                out.append(UInt8(value))
                value = 0
                digits = 0
            } else {
                return nil
            }
        }
        guard digits > 0, out.count == 3 else { return nil }
        out.append(UInt8(value))
        return out
    }

    static func parseV6(_ s: String) -> [UInt8]? {
        guard s.contains(":"), s.count <= 45 else { return nil }
        let halves = s.components(separatedByString: "::")
        guard halves.count <= 2 else { return nil }
        func groups(_ part: String) -> [UInt8]? {
            if part.isEmpty { return [] }
            var out: [UInt8] = []
            let items = part.split(separator: ":", omittingEmptySubsequences: false)
            for (i, item) in items.enumerated() {
                if i == items.count - 1, item.contains(".") {
                    guard let v4 = parseV4(item) else { return nil }
                    out += v4
                    continue
                }
                guard (1...4).contains(item.count), let n = UInt16(item, radix: 16) else { return nil }
                out += [UInt8(n >> 8), UInt8(n & 0xff)]
            }
            return out
        }
        guard let head = groups(halves[0]) else { return nil }
        if halves.count == 1 { return head.count == 16 ? head : nil }
        guard let tail = groups(halves[1]), head.count + tail.count <= 14 else { return nil }
        return head + [UInt8](repeating: 0, count: 16 - head.count - tail.count) + tail
    }

    /// Canonical text: dotted quad for IPv4, full lowercase groups for IPv6 (stable as a limit key).
    public var description: String {
        if isV4 {
            return String(unsafeUninitializedCapacity: 15) { buf in
                var n = 0
                for (i, b) in bytes[12...].enumerated() {
                    if i > 0 { buf[n] = UInt8(ascii: "."); n += 1 }
                    if b >= 100 { buf[n] = 48 + b / 100; n += 1 }
                    if b >= 10 { buf[n] = 48 + b / 10 % 10; n += 1 }
                    buf[n] = 48 + b % 10
                    n += 1
                }
                return n
            }
        }
        return stride(from: 0, to: 16, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }.joined(separator: ":")
    }
}

extension String {
    /// Splits on a whole separator string (Foundation-free).
    func components(separatedByString sep: String) -> [String] {
        var out: [String] = []
        var rest = Substring(self)
        while let r = rest.firstRange(of: sep) {
            out.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        out.append(String(rest))
        return out
    }
}
