import CCrypto
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

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
