import WeatherCore

/// A worker's memory of failing providers: after a call fails in a way no query could avoid
/// (`WeatherProvider.failsEveryQuery`: timeout, no connection, key refused, 429, 5xx) the
/// provider is skipped for a pause, so an outage costs each worker a few calls a minute instead
/// of one per uncached request (and a provider answering 429 is not asked again before its
/// `Retry-After`).
///
/// The pause doubles with each failure in a row, 1, 2, 4, ... seconds, up to `longest`
/// (`WEATHER_PROVIDER_COOLDOWN`); a `Retry-After` on the provider's answer (a 429, or a 5xx that
/// sends one) lengthens it, up to `longest` as well. One success forgets the failures. Times are
/// the clock's whole seconds, so a pause of 1 s ends when the next second begins. When a pause
/// ends, the next request in this worker calls the provider again: that call decides whether the
/// pause starts over, longer, or ends.
///
/// Kept per worker, in memory: nothing is written, and nothing is shared between workers. With
/// N workers a dead provider sees at most N calls per pause. `longest == 0` turns it off.
public struct ProviderCooldowns: Sendable, Equatable {
    /// The longest pause in seconds; 0 = never skip a provider.
    public let longest: Int64
    private var entries: [String: Entry] = [:]

    /// One provider's failures in a row, the end of its pause, and the last failure (which a
    /// skipped provider's answer repeats: 504 after a timeout, 502 otherwise).
    public struct Entry: Sendable, Equatable {
        public var failures: Int
        public var until: Timestamp
        public var failure: ProviderFailure
    }

    public init(longest: Int64) {
        self.longest = max(0, longest)
    }

    /// The provider's pause when one is running at `now`. A pause that would end more than
    /// `longest` seconds after `now` has ended: the clock went back (an NTP step, an operator's
    /// `date`), and a pause must never outlast the setting.
    public func pause(of provider: String, now: Timestamp) -> Entry? {
        guard let entry = entries[provider], now < entry.until, entry.until.seconds - now.seconds <= longest else { return nil }
        return entry
    }

    /// Seconds a pause lasts after `failures` failures in a row, lengthened by a `Retry-After`.
    public func seconds(afterFailures failures: Int, retryAfter: Int?) -> Int64 {
        let doubled: Int64 = failures >= 32 ? longest : min(longest, Int64(1) << Int64(max(0, failures - 1)))
        return max(doubled, min(longest, Int64(max(0, retryAfter ?? 0))))
    }

    /// Records a failed call at `now`.
    public mutating func failed(_ provider: String, _ failure: ProviderFailure, now: Timestamp) {
        guard longest > 0 else { return }
        let failures = (entries[provider]?.failures ?? 0) + 1
        var retryAfter: Int?
        if case .httpStatus(_, let after) = failure { retryAfter = after }
        let until = now.adding(seconds: seconds(afterFailures: failures, retryAfter: retryAfter))
        entries[provider] = Entry(failures: failures, until: until, failure: failure)
    }

    /// Records a successful call: the provider's failures are forgotten.
    public mutating func succeeded(_ provider: String) {
        entries[provider] = nil
    }
}
