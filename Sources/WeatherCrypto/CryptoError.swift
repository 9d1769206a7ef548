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
