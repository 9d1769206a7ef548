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
        #if DEBUG
        return Timestamp(seconds: Int64(ts.tv_sec) + TestClockOffset.seconds())
        #else
        return Timestamp(seconds: Int64(ts.tv_sec))
        #endif
    }
}

#if DEBUG
/// Debug builds only: the whole seconds written in the file `CW_TEST_CLOCK_OFFSET_FILE` names are
/// added to the wall clock, read again on every call (no file, or no number in it: 0).
///
/// End-to-end tests start real gateway processes, whose clock no test can inject; with this they
/// move it forward (`GatewayHarness.advanceClock`) instead of sleeping through a token's expiry, a
/// cache TTL or a `Retry-After`. Everything the gateway times by the wall clock reads
/// `systemNow()`; its waits on sockets and locks use the monotonic clock and are not moved.
/// Release builds (`make dist`, `make run`, bench/) have no such setting. (libfaketime, the
/// usual tool, hides a Swift program's arguments from `CommandLine`: session 15.)
enum TestClockOffset {
    static let path: String? = getenv("CW_TEST_CLOCK_OFFSET_FILE").map { String(cString: $0) }

    static func seconds() -> Int64 {
        guard let path else { return 0 }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return 0 }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard n > 0 else { return 0 }
        let text = String(decoding: bytes[..<n], as: UTF8.self).filter { !$0.isWhitespace }
        return Int64(text) ?? 0
    }
}
#endif
