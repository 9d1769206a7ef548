import CCrypto
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Comparison of secrets whose time does not depend on where they differ.
public enum ConstantTime {
    /// True when both byte strings are equal; lengths are compared first (length is not secret).
    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, a.count) == 0 } }
    }

    /// The same for strings, by their UTF-8 bytes, in place: copying both into arrays cost two
    /// allocations on every legacy-token request (a hot-path audit, session 32).
    public static func equals(_ a: String, _ b: String) -> Bool {
        var a = a, b = b
        return a.withUTF8 { pa in
            b.withUTF8 { pb in
                guard pa.count == pb.count else { return false }
                if pa.isEmpty { return true }
                return CRYPTO_memcmp(pa.baseAddress, pb.baseAddress, pa.count) == 0
            }
        }
    }
}
