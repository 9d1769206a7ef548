import CCrypto
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

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
