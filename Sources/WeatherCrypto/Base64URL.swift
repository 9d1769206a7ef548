/// Base64url without padding (RFC 4648 §5), the alphabet of every token.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes without `=` padding, straight into the string's storage.
    public static func encode(_ bytes: [UInt8]) -> String {
        let length = (bytes.count * 4 + 2) / 3  // 4 characters per 3 bytes, 2 or 3 for a last 1 or 2
        return alphabet.withUnsafeBufferPointer { table in
            String(unsafeUninitializedCapacity: length) { out in
                var i = 0, o = 0
                while i + 3 <= bytes.count {
                    let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
                    out[o] = table[Int(n >> 18 & 63)]
                    out[o + 1] = table[Int(n >> 12 & 63)]
                    out[o + 2] = table[Int(n >> 6 & 63)]
                    out[o + 3] = table[Int(n & 63)]
                    i += 3
                    o += 4
                }
                if i < bytes.count {
                    let n = UInt32(bytes[i]) << 16 | (i + 1 < bytes.count ? UInt32(bytes[i + 1]) << 8 : 0)
                    out[o] = table[Int(n >> 18 & 63)]
                    out[o + 1] = table[Int(n >> 12 & 63)]
                    o += 2
                    if i + 1 < bytes.count {
                        out[o] = table[Int(n >> 6 & 63)]
                        o += 1
                    }
                }
                return o
            }
        }
    }
}
