#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The real clock.
public struct SystemClock: Clock {
    public init() {}
    public func now() -> Timestamp { Timestamp.systemNow() }
}

extension Timestamp {
    /// Wall-clock now, whole seconds.
    public static func systemNow() -> Timestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Timestamp(seconds: Int64(ts.tv_sec))
    }
}
