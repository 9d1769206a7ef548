#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The monotonic clock, for durations and deadlines that clock steps must not move: the log
/// line's `duration_ms`, a provider call's deadline, a waiter's budget, a CGI body's deadline.
public enum MonotonicTime {
    /// Nanoseconds since an arbitrary start.
    @inlinable public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Milliseconds since the same start.
    @inlinable public static func milliseconds() -> Int64 { Int64(now() / 1_000_000) }

    /// Microseconds since `start` (a `now()`): the log line writes them as milliseconds with
    /// three decimals (`LogLine.addMilliseconds`).
    @inlinable public static func microseconds(since start: UInt64) -> UInt64 { (now() - start) / 1000 }

    /// `seconds` after `start` (a `now()`), up to a day; `.max`, never, for an infinite span.
    @inlinable public static func deadline(after seconds: Double, from start: UInt64) -> UInt64 {
        guard seconds.isFinite else { return .max }
        return start + UInt64(max(0, min(seconds, 86_400)) * 1_000_000_000)
    }

    /// Seconds from `now` (a `now()`) until `deadline`, 0 once it has passed, infinite for `.max`.
    @inlinable public static func seconds(until deadline: UInt64, from now: UInt64) -> Double {
        guard deadline != .max else { return .infinity }
        return deadline > now ? Double(deadline - now) / 1_000_000_000 : 0
    }
}
