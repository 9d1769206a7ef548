import CCrypto
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

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
