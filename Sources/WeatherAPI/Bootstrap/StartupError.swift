import WeatherCore
import WeatherCrypto
import WeatherStore
#if canImport(Glibc)
import Glibc
#endif

/// Why the program could not start. The message says what to change.
public struct StartupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ d: String) { description = d }
}
