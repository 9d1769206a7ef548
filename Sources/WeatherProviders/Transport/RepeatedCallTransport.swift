import WeatherCore

/// An `HTTPTransport` that answers a call repeated within moments with the answer to the first,
/// marked `HTTPResult.isRepeat`, instead of sending it again.
///
/// While a provider's day has not turned (its series still starts at the place's yesterday, just
/// after midnight) the cell's outlook comes back a day short, and the gateway then asks for
/// `days=15` on its own: the very same URL, milliseconds later, for the very same answer, which
/// the provider normaliser only cuts differently. Each such request cost a second billed call (a
/// midnight economy run: 7.7 calls a cell in the first ten minutes of a lag with only `days=15`,
/// 3.9 with `days=7`). Kept here, the second cut costs none, whichever of the gateway's paths
/// asks for it.
///
/// Only the last 2xx answer is kept (a failed call leaves it), only for `windowSeconds` from its
/// arrival, and only the same URL gets it: an answer some seconds old is what the cache would have
/// given. A body over `maxKeptBytes` is not kept, so that a worker holds at most that much between
/// calls (the kept answer goes with the next call after its window). Each worker has its own
/// transport, so only that worker's own calls of the last moments are answered again. Nor is an
/// answer given again once the gateway's wall clock has moved by the cache's TTL since it arrived
/// (`freshSeconds`): the cache would have fetched anew then, and a repeat stored as a fresh copy
/// would outlive its TTL (with a TTL of a second, or a clock moved on by a test: session 23 found
/// a test's stale cell answered fresh from a repeat).
public final class RepeatedCallTransport: HTTPTransport, @unchecked Sendable {
    /// How long an answer is given again: the gap between the outlook's call and the forecast's
    /// (a cache write and a fetch claim), with room for a busy database.
    public static let defaultWindowSeconds = 2.0
    /// The largest body kept: a forecast is about 30 KB, and the transport takes up to 2 MiB.
    public static let maxKeptBytes = 256 * 1024

    private let base: any HTTPTransport
    private let windowNanoseconds: UInt64
    private let clock: @Sendable () -> UInt64
    private let wallClock: @Sendable () -> Timestamp
    private let freshSeconds: Int64
    private let mutex = PthreadMutex()
    private var last: (url: String, result: HTTPResult, arrived: UInt64, arrivedWall: Timestamp)?

    /// - Parameters:
    ///   - base: the transport that sends calls.
    ///   - windowSeconds: how long after its arrival an answer is given again.
    ///   - clock: monotonic nanoseconds; tests move it by hand.
    ///   - freshSeconds: the cache's TTL; an answer is not given again once `wallClock` has moved
    ///     by that much since it arrived (or has gone back).
    ///   - wallClock: the gateway's wall clock (a debug build's test offset included).
    public init(
        _ base: any HTTPTransport, windowSeconds: Double = RepeatedCallTransport.defaultWindowSeconds,
        clock: @escaping @Sendable () -> UInt64 = { MonotonicTime.now() },
        freshSeconds: Int64 = .max, wallClock: @escaping @Sendable () -> Timestamp = { Timestamp.systemNow() }
    ) {
        precondition(windowSeconds >= 0 && windowSeconds.isFinite, "window must be a finite number of seconds")
        self.base = base
        self.windowNanoseconds = UInt64(windowSeconds * 1_000_000_000)
        self.clock = clock
        self.freshSeconds = freshSeconds
        self.wallClock = wallClock
    }

    public func get(_ url: String, timeoutSeconds: Double) throws(ProviderFailure) -> HTTPResult {
        let now = clock(), wall = wallClock()
        mutex.lock()
        if let kept = last {
            let age = wall.seconds - kept.arrivedWall.seconds
            // Its window is over, or the cache would have asked anew by now.
            if now &- kept.arrived >= windowNanoseconds || age < 0 || age >= freshSeconds { last = nil }
        }
        let kept = last
        mutex.unlock()
        if let kept, kept.url == url {
            var again = kept.result
            again.isRepeat = true
            return again
        }
        let result = try base.get(url, timeoutSeconds: timeoutSeconds)
        if (200...299).contains(result.status) && result.body.count <= Self.maxKeptBytes {
            let arrived = clock(), arrivedWall = wallClock()
            mutex.lock()
            last = (url, result, arrived, arrivedWall)
            mutex.unlock()
        }
        return result
    }
}
