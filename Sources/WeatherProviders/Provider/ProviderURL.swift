import WeatherCore

/// URL text helpers shared by both providers, so keys and bases are handled the same way.
enum ProviderURL {
    /// Percent-encodes everything but RFC 3986 unreserved characters, so a key can never inject
    /// a path segment, a query parameter or a fragment.
    static func encode(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out.unicodeScalars.append("%")
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0F)]))
            }
        }
        return out
    }

    /// The base without trailing slashes, so `https://host/` and `https://host` build the same URL.
    static func base(_ base: String) -> String {
        var b = Substring(base)
        while b.hasSuffix("/") { b = b.dropLast() }
        return String(b)
    }

    /// A snapped coordinate as it goes on the wire: `GridPoint.format`, the same text as cache keys.
    static func coordinate(_ value: Double) -> String { GridPoint.format(value) }
}
