import WeatherCore

/// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit pseudorandom function made for
/// short inputs. The gateway keys its rate buckets' client addresses with it (`Limiter`), so
/// that neither the table the workers share nor `weather_rate_limits` holds an address, and
/// nobody without the server key can try every IPv4 address against what they hold. A few
/// hundred instructions for an address, where an HMAC-SHA256 is two compression rounds of
/// SHA-256 and a call into libcrypto: this runs on every weather request with limits on.
public struct SipHash24: Sendable {
    private let k0: UInt64, k1: UInt64

    /// A 16-byte key, read as two little-endian words as the reference does.
    public init(key: [UInt8]) {
        precondition(key.count == 16, "a SipHash key is 16 bytes")
        k0 = Self.littleEndianWord(key, at: 0)
        k1 = Self.littleEndianWord(key, at: 8)
    }

    /// The 64-bit hash of `bytes`.
    public func hash(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        var v = (0x736f_6d65_7073_6575 ^ k0, 0x646f_7261_6e64_6f6d ^ k1, 0x6c79_6765_6e65_7261 ^ k0, 0x7465_6462_7974_6573 ^ k1)
        let whole = bytes.count & ~7
        var i = 0
        while i < whole {
            Self.absorb(bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self).littleEndian, into: &v)
            i += 8
        }
        // The last word: the remaining bytes, little-endian, and the length's low byte on top.
        var last = UInt64(truncatingIfNeeded: bytes.count) << 56
        for (shift, byte) in bytes[whole...].enumerated() { last |= UInt64(byte) << (8 * UInt64(shift)) }
        Self.absorb(last, into: &v)
        v.2 ^= 0xff
        for _ in 0..<4 { Self.round(&v) }
        return v.0 ^ v.1 ^ v.2 ^ v.3
    }

    /// The hash of a string's UTF-8 bytes.
    public func hash(_ text: String) -> UInt64 {
        var text = text
        return text.withUTF8 { hash(UnsafeRawBufferPointer($0)) }
    }

    /// `prefix`, then the hash of a string's UTF-8 bytes as 16 lowercase hex digits.
    public func hex(_ text: String, after prefix: String = "") -> String {
        withUnsafeBytes(of: hash(text).bigEndian) { Hex.encode($0, after: prefix) }
    }

    private static func absorb(_ m: UInt64, into v: inout (UInt64, UInt64, UInt64, UInt64)) {
        v.3 ^= m
        round(&v)
        round(&v)
        v.0 ^= m
    }

    private static func round(_ v: inout (UInt64, UInt64, UInt64, UInt64)) {
        v.0 &+= v.1
        v.1 = rotate(v.1, 13) ^ v.0
        v.0 = rotate(v.0, 32)
        v.2 &+= v.3
        v.3 = rotate(v.3, 16) ^ v.2
        v.0 &+= v.3
        v.3 = rotate(v.3, 21) ^ v.0
        v.2 &+= v.1
        v.1 = rotate(v.1, 17) ^ v.2
        v.2 = rotate(v.2, 32)
    }

    private static func rotate(_ x: UInt64, _ n: UInt64) -> UInt64 { x << n | x >> (64 - n) }

    private static func littleEndianWord(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        (0..<8).reduce(0) { $0 | UInt64(bytes[offset + $1]) << (8 * UInt64($1)) }
    }
}
