import CCrypto
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// A failed libcrypto call. Carries the function name only: never key or message bytes.
public struct CryptoError: Error, CustomStringConvertible {
    public let function: String
    public var description: String { "libcrypto call \(function) failed" }
}

/// SHA-256 digests (FIPS 180-4), CryptoKit-shaped.
public enum SHA256 {
    /// The 32-byte digest of `data`.
    public static func hash(_ data: some Collection<UInt8>) -> [UInt8] {
        if let buf = data as? UnsafeBufferPointer<UInt8> { return hash(buffer: buf) }
        return data.withContiguousStorageIfAvailable { hash(buffer: $0) } ?? Array(data).withUnsafeBufferPointer { hash(buffer: $0) }
    }

    private static func hash(buffer: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        // OpenSSL's low-level functions on a context on the stack (see ccrypto_sha256): no
        // allocation, no provider. OpenSSL 3's one-shot `SHA256()` and `EVP_Digest` go through
        // the provider machinery, which costs memory on first use and a fetch or a context
        // allocation on every call.
        let ok = out.withUnsafeMutableBufferPointer { o in
            ccrypto_sha256(buffer.baseAddress, buffer.count, o.baseAddress) == 1
        }
        // The low-level functions cannot fail on valid pointers; nothing sensible is left to do.
        precondition(ok, "SHA-256 failed")
        return out
    }

    /// Lowercase hex digest of a string's UTF-8 bytes: the form `token_hash` stores.
    public static func hex(_ text: String) -> String {
        withUnsafeBytes(of: words(text)) { Hex.encode($0) }
    }

    /// The digest of a string's UTF-8 bytes as the memory of four words (`TokenDigest`), computed
    /// on the stack: no array, no string.
    public static func words(_ text: String) -> (UInt64, UInt64, UInt64, UInt64) {
        var text = text
        var out: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let ok = text.withUTF8 { utf8 in
            withUnsafeMutableBytes(of: &out) { ccrypto_sha256(utf8.baseAddress, utf8.count, $0.baseAddress?.assumingMemoryBound(to: UInt8.self)) == 1 }
        }
        precondition(ok, "SHA-256 failed")
        return out
    }
}

/// HMAC-SHA256 (RFC 2104) with every libcrypto return code checked.
public enum HMACSHA256 {
    /// A key with its two padded blocks already hashed (`ccrypto_hmac_sha256_pads`): make one per
    /// key and keep it. A MAC of a message under 56 bytes is then two SHA-256 blocks and no
    /// allocation; spelled out over whole arrays it was four blocks and about six arrays.
    /// OpenSSL 3's `HMAC()` fetches SHA-256 from the provider on every call.
    public struct Key: Sendable {
        private var pads = ccrypto_hmac_pads()

        public init(_ key: [UInt8]) {
            let ok = key.withUnsafeBufferPointer { ccrypto_hmac_sha256_pads($0.baseAddress, $0.count, &pads) == 1 }
            precondition(ok, "HMAC-SHA256 key set-up failed")
        }

        /// The 32-byte MAC of `message`.
        public func authenticationCode(for message: some Collection<UInt8>) -> [UInt8] {
            var out = [UInt8](repeating: 0, count: 32)
            let ok = out.withUnsafeMutableBufferPointer { o in
                withUnsafePointer(to: pads) { p in
                    message.withContiguousStorageIfAvailable { ccrypto_hmac_sha256(p, $0.baseAddress, $0.count, o.baseAddress) == 1 }
                        ?? Array(message).withUnsafeBufferPointer { ccrypto_hmac_sha256(p, $0.baseAddress, $0.count, o.baseAddress) == 1 }
                }
            }
            precondition(ok, "HMAC-SHA256 failed")
            return out
        }

        /// Lowercase hex MAC of a string's UTF-8 bytes.
        public func hex(_ text: String) -> String {
            var text = text
            var out: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
            let ok = withUnsafeMutableBytes(of: &out) { o in
                withUnsafePointer(to: pads) { p in
                    text.withUTF8 { ccrypto_hmac_sha256(p, $0.baseAddress, $0.count, o.baseAddress?.assumingMemoryBound(to: UInt8.self)) == 1 }
                }
            }
            precondition(ok, "HMAC-SHA256 failed")
            return withUnsafeBytes(of: out) { Hex.encode($0) }
        }
    }

    /// The 32-byte MAC of `message` under `key` (sets the key up for this one call).
    public static func authenticationCode(for message: some Collection<UInt8>, key: [UInt8]) -> [UInt8] {
        Key(key).authenticationCode(for: message)
    }

    /// Lowercase hex MAC of a string's UTF-8 bytes.
    public static func hex(_ text: String, key: [UInt8]) -> String {
        Key(key).hex(text)
    }
}

/// Randomness straight from the kernel's CSPRNG (`getrandom(2)`, blocking only until the pool
/// is first seeded at boot). OpenSSL's `RAND_bytes` was a tenth of creating a session: its DRBG
/// layers cost more than the system call they end in.
public enum SecureRandom {
    /// `count` unpredictable bytes; throws rather than return weak ones.
    public static func bytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = out.withUnsafeMutableBytes { getrandom($0.baseAddress! + filled, count - filled, 0) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw CryptoError(function: "getrandom") }
            filled += n
        }
        return out
    }
}

/// Comparison of secrets whose time does not depend on where they differ.
public enum ConstantTime {
    /// True when both byte strings are equal; lengths are compared first (length is not secret).
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }

    /// The same for strings, by their UTF-8 bytes.
    public static func equals(_ a: String, _ b: String) -> Bool { equals(Array(a.utf8), Array(b.utf8)) }
}
