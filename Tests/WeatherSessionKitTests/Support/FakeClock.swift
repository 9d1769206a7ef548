import Foundation
import WeatherSessionKit

/// A settable clock: tests move time instead of sleeping.
final class FakeClock: WeatherClock, @unchecked Sendable {
    // @unchecked: `current` is only touched under `lock`.
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date = Date(timeIntervalSince1970: 1_780_000_000)) {
        current = start
    }

    func now() -> Date {
        lock.withLock { current }
    }

    func advance(by seconds: TimeInterval) {
        lock.withLock { current += seconds }
    }

    /// Waits no real time: the clock moves on by `seconds`, and `sleeps` records the wait.
    func sleep(for seconds: TimeInterval) async throws {
        lock.withLock {
            current += seconds
            waits.append(seconds)
        }
    }

    private var waits: [TimeInterval] = []
    /// Every `sleep(for:)` so far, in order.
    var sleeps: [TimeInterval] { lock.withLock { waits } }
}

extension TimeInterval {
    static func hours(_ value: Double) -> TimeInterval { value * 3600 }
    static func days(_ value: Double) -> TimeInterval { value * 86_400 }
}
