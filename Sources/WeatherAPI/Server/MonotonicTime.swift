#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Elapsed time for the log line's `duration_ms` (monotonic, so clock steps do not matter).
enum MonotonicTime {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func milliseconds(since start: UInt64) -> String {
        let us = (now() - start) / 1000
        let frac = us % 1000
        return "\(us / 1000)." + (frac < 10 ? "00" : frac < 100 ? "0" : "") + "\(frac)"
    }
}
