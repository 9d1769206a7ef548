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
        var text = text
        return Hex.encode(text.withUTF8 { hash($0) })
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
    /// The 32-byte MAC of `message` under `key`: RFC 2104 spelled out over `SHA256.hash`
    /// (OpenSSL 3's `HMAC()` fetches SHA-256 from the provider on every call).
    public static func authenticationCode(for message: some Collection<UInt8>, key: [UInt8]) throws -> [UInt8] {
        let blockSize = 64
        var block = key.count > blockSize ? SHA256.hash(key) : key
        block += [UInt8](repeating: 0, count: blockSize - block.count)
        var inner = block.map { $0 ^ 0x36 }
        inner.append(contentsOf: message)
        var outer = block.map { $0 ^ 0x5c }
        outer += SHA256.hash(inner)
        return SHA256.hash(outer)
    }

    /// Lowercase hex MAC of a string's UTF-8 bytes.
    public static func hex(_ text: String, key: [UInt8]) throws -> String {
        Hex.encode(try authenticationCode(for: Array(text.utf8), key: key))
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
