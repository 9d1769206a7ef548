import Foundation

/// The source of wall-clock time for session deadlines.
///
/// Every "is this token still good?" decision in ``WeatherSessionService`` reads the time through
/// this protocol, so tests move time with a settable fake instead of sleeping, and an app could
/// plug in a clock it trusts more than `Date()`.
public protocol WeatherClock: Sendable {
    /// The current time.
    func now() -> Date

    /// Waits `seconds` (the pause between repeats of an unanswered refresh). The default is
    /// `Task.sleep`; a test clock moves its own time instead.
    func sleep(for seconds: TimeInterval) async throws
}

extension WeatherClock {
    /// Waits `seconds` with `Task.sleep`.
    public func sleep(for seconds: TimeInterval) async throws {
        try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000))
    }
}

/// The system wall clock, `Date()`.
///
/// Deadlines stored by ``WeatherSessionService`` are computed from this clock at the moment the
/// creating or refreshing request went out (see ``WeatherSession``), so a device clock that is wrong by hours still
/// gets correct token lifetimes, as long as it does not jump while the app runs.
public struct SystemWeatherClock: WeatherClock {
    /// Creates the system clock.
    public init() {}

    /// The current time, `Date()`.
    public func now() -> Date { Date() }
}
