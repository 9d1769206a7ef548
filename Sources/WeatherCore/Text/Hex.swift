/// Lowercase hexadecimal, the database's form of every hash.
public enum Hex {
    /// Two lowercase hex digits per byte.
    ///
    /// Inlinable so that callers in other modules get the buffer path: compiled once in this
    /// module, the generic loop ran through protocol witnesses, ~10,000 instructions a hash.
    @inlinable
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable { encode(UnsafeRawBufferPointer($0)) }
            ?? Array(bytes).withUnsafeBytes { encode($0) }
    }

    /// Two lowercase hex digits per byte of `bytes`.
    public static func encode(_ bytes: UnsafeRawBufferPointer) -> String { encode(bytes, after: "") }

    /// `prefix`, then two lowercase hex digits per byte of `bytes`: one string made, where
    /// `prefix + encode(bytes)` makes two (a rate bucket's key, on every weather request).
    public static func encode(_ bytes: UnsafeRawBufferPointer, after prefix: String) -> String {
        var prefix = prefix
        return prefix.withUTF8 { head in
            String(unsafeUninitializedCapacity: head.count + bytes.count * 2) { out in
                var i = 0
                for c in head {
                    out[i] = c
                    i += 1
                }
                for b in bytes {
                    out[i] = nibble(b >> 4)
                    out[i + 1] = nibble(b & 0x0f)
                    i += 2
                }
                return i
            }
        }
    }

    @inline(__always)
    private static func nibble(_ n: UInt8) -> UInt8 { n < 10 ? 48 + n : 87 + n }

    /// The value of one hex digit (`0-9`, `a-f`, `A-F`), or nil for any other byte. Every hex
    /// reader (percent escapes, chunk sizes, JSON's `\u`) uses it.
    @inlinable
    public static func value(ofDigit c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 65...70: return c - 55
        case 97...102: return c - 87
        default: return nil
        }
    }

    /// Bytes of a hex string (either case), or `nil` when it is not hex.
    public static func decode(_ text: String) -> [UInt8]? {
        let u = Array(text.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(u.count / 2)
        var i = 0
        while i < u.count {
            guard let hi = value(ofDigit: u[i]), let lo = value(ofDigit: u[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
