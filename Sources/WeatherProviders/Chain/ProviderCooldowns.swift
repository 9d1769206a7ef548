import WeatherCore

/// The memory of failing providers: after a call fails in a way no query could avoid
/// (`WeatherProvider.failsEveryQuery`: timeout, no connection, a refused certificate, key
/// refused, 429, 5xx, a redirect, a 200 that is not JSON) the
/// provider is skipped for a pause, so an outage costs a few calls a minute instead of one per
/// uncached request (and a provider answering 429 is not asked again before its
/// `Retry-After`).
///
/// The pause doubles with each failure in a row, 1, 2, 4, ... seconds, up to `longest`
/// (`WEATHER_PROVIDER_COOLDOWN`); a `Retry-After` on the answer that paused it (a 429, a 5xx or
/// any other status that pauses) lengthens it, up to `longestRetryAfter` (an hour) or `longest`
/// if that is longer.
/// One success forgets the failures. Times are
/// the clock's whole seconds, so a pause of 1 s ends when the next second begins. When a pause
/// ends, the next uncached request calls the provider again: that call decides whether the pause
/// starts over, longer, or ends. With `probeSeconds` (`admit`), the worker that makes that call
/// holds the provider paused for the others meanwhile, so one call tests it, not one per worker.
///
/// Kept on a `ProviderPauseBoard` when there is one (a worker's: the page beside its database
/// that every worker of the machine maps), so one worker's failed call pauses the provider for
/// all of them; nothing goes to the database. Failures in a row are counted across workers by
/// `record(after:failure:retryAfter:now:)`: calls already on their way when a pause began are
/// the same outage, and a record that ended long ago starts over. Without a board, or for a
/// provider the board has no room for, pauses stay in this value's memory, and with N workers a
/// dead provider sees up to N calls per pause.
/// `longest == 0` turns it off.
public struct ProviderCooldowns: Sendable {
    /// The longest pause in seconds; 0 = never skip a provider.
    public let longest: Int64
    private let board: (any ProviderPauseBoard)?
    /// Pauses kept here: all of them without a board, else those it had no room for.
    private var entries: [String: Entry] = [:]
    /// How long a worker testing a provider whose pause just ended keeps it paused for the others
    /// (`admit`): as long as its fetch may take (every provider's timeout) and a second, since
    /// failures are recorded when the fetch ends. 0: no such hold.
    public let probeSeconds: Int64
    /// The holds this worker set (`admit`), by provider: their ends, and the end of the pause
    /// each replaced (put back by `releaseClaims` when the fetch did not settle it).
    private var probes: [String: (end: Timestamp, original: Timestamp, hold: Entry)] = [:]

    /// One provider's failures in a row, the end of its pause, and the last failure (which a
    /// skipped provider's answer repeats: 504 after a timeout, 502 otherwise).
    public struct Entry: Sendable, Equatable {
        public var failures: Int
        public var until: Timestamp
        public var failure: ProviderFailure
        /// A `Retry-After` made the pause longer than `longest` (see `ceiling(of:)`).
        public var lengthened = false
    }

    /// The longest pause a provider's own `Retry-After` asks for that is kept: an hour. A
    /// provider whose quota is spent may say minutes or hours; calling it again every `longest`
    /// seconds (30 by default) is the loop Visual Crossing's terms forbid, and every refused call
    /// costs a round trip and, with the cell uncached, a failover to the other provider's quota.
    /// An hour bounds what a wrong header (a proxy's, say) can cost: a provider's hour, not its day.
    public static let longestRetryAfter: Int64 = 3600

    /// The furthest from now `entry`'s pause may end: `longest`, or up to `longestRetryAfter`
    /// for one a `Retry-After` made longer than `longest`. A pause said to end later has met a
    /// clock that went back (only such a lengthened pause can then last up to an hour).
    /// With pauses off (`longest == 0`) none is running, whatever another worker wrote.
    public func ceiling(of entry: Entry) -> Int64 {
        guard longest > 0 else { return 0 }
        return entry.lengthened ? longestLengthened : longest
    }

    /// The longest a `Retry-After` may make a pause.
    private var longestLengthened: Int64 { max(longest, Self.longestRetryAfter) }

    public init(longest: Int64, board: (any ProviderPauseBoard)? = nil, probeSeconds: Int64 = 0) {
        self.longest = max(0, longest)
        self.board = board
        self.probeSeconds = max(0, probeSeconds)
    }

    /// Whether to call `provider` at `now`: its running pause when there is one (skip it), else
    /// nil (call it). When its pause has just ended (within `longest`: the same outage), the call
    /// about to be made decides whether it starts over, and this worker claims it: the provider
    /// stays paused for every other worker for `probeSeconds` (at most `longest`), so they answer
    /// from what they have at once instead of each waiting out the same timeouts. An incident
    /// drill: with the providers slower than their timeout, every worker called them at each
    /// pause's end and served nobody for the timeouts (6–8 s, every pause). A claim whose worker
    /// died ends by itself; this worker's failure ends it as one more failure in a row, its
    /// success as any success does.
    public mutating func admit(_ provider: String, now: Timestamp) -> Entry? {
        if let running = pause(of: provider, now: now) {
            return probes[provider]?.end == running.until ? nil : running  // this worker's own hold: its call
        }
        let hold = min(probeSeconds, longest)
        guard hold > 0 else { return nil }
        let end = now.adding(seconds: hold)
        // The claim of `record`, or nil when there is nothing to claim (no recent failure).
        func claim(_ record: Entry?) -> Entry? {
            guard var record, now >= record.until, now.seconds - record.until.seconds <= longest else { return nil }
            record.until = end
            record.lengthened = false
            return record
        }
        if entries[provider] == nil, let board {
            guard board.pause(of: provider) != nil else { return nil }  // a healthy provider: no write
            var taken: (original: Timestamp, hold: Entry)?
            let onBoard = board.update(provider) { current in
                taken = nil
                let record = current.map(Entry.init(shared:))
                // Another worker's claim (or failure) made meanwhile: leave it.
                guard let record, let claimedRecord = claim(record) else { return current }
                // As the board will give it back: what `releaseClaims` compares.
                taken = (record.until, Entry(shared: claimedRecord.shared))
                return claimedRecord.shared
            }
            if onBoard {
                if let taken { probes[provider] = (end, taken.original, taken.hold) }
                return taken != nil ? nil : pause(of: provider, now: now)
            }
        }
        if let record = entries[provider], let claimedRecord = claim(record) {
            entries[provider] = claimedRecord
            probes[provider] = (end, record.until, claimedRecord)
        }
        return nil
    }

    /// Gives back the holds of this worker's fetch that no call settled (`failed`, `succeeded`):
    /// a provider it did not reach (an earlier one answered), or one whose failure pauses
    /// nothing (an answer it could not use, a query's own error). Each gets the end of the pause
    /// it replaced, as if never claimed, unless another worker changed it since (the whole
    /// record compared: a 429 another worker recorded during the hold keeps the hold's end, but
    /// not its failure, and its `Retry-After` must stand; a review). A hold left in place kept a
    /// healthy fallback paused, and with steady traffic renewed (a review).
    public mutating func releaseClaims() {
        for (provider, claim) in probes {
            func restored(_ entry: Entry?) -> Entry? {
                guard var entry, entry == claim.hold else { return entry }
                entry.until = claim.original
                return entry
            }
            if entries[provider] == nil, let board,
                board.update(
                    provider,
                    { current in
                        current.flatMap { restored(Entry(shared: $0))?.shared }
                    })
            {
                continue
            }
            entries[provider] = restored(entries[provider])
        }
        probes.removeAll()
    }

    /// The provider's pause when one is running at `now`. A pause that would end more than
    /// `ceiling(of:)` seconds after `now` has ended: the clock went back (an NTP step, an
    /// operator's `date`), and a pause must never outlast the setting or a kept `Retry-After`.
    public func pause(of provider: String, now: Timestamp) -> Entry? {
        guard let entry = entries[provider] ?? board?.pause(of: provider).map(Entry.init(shared:)), now < entry.until,
            entry.until.seconds - now.seconds <= ceiling(of: entry)
        else { return nil }
        return entry
    }

    /// Seconds a pause lasts after `failures` failures in a row, lengthened by a `Retry-After`.
    public func seconds(afterFailures failures: Int, retryAfter: Int?) -> Int64 {
        let doubled: Int64 = failures >= 32 ? longest : min(longest, Int64(1) << Int64(max(0, failures - 1)))
        return max(doubled, min(longestLengthened, Int64(max(0, retryAfter ?? 0))))
    }

    /// Claims (`admit`) every provider of `providers` whose pause has just ended, at the start of
    /// a fetch that may call them all: two providers whose pauses ended together were tested by
    /// two workers at once, one each, and a gateway of two workers stalled for the timeout (a
    /// re-check of the incident drill).
    public mutating func admitAll(_ providers: [String], now: Timestamp) {
        guard probeSeconds > 0 else { return }
        for provider in providers { _ = admit(provider, now: now) }
    }

    /// Records a failed call at `now`.
    public mutating func failed(_ provider: String, _ failure: ProviderFailure, now: Timestamp) {
        guard longest > 0 else { return }
        var retryAfter: Int?
        if case .httpStatus(_, let after) = failure { retryAfter = after }
        // This worker's claim (`admit`), still as it set it: the pause it stood for had ended, so
        // this is one more failure in a row, not a call that was under way in a running pause.
        let claimEnd = probes.removeValue(forKey: provider)?.end
        func previous(_ entry: Entry?) -> Entry? {
            guard var entry, let claimEnd, entry.until == claimEnd else { return entry }
            entry.until = min(entry.until, now)
            return entry
        }
        if entries[provider] == nil, let board,
            board.update(
                provider,
                {
                    record(after: previous($0.map(Entry.init(shared:))), failure: failure, retryAfter: retryAfter, now: now).shared
                })
        {
            return
        }
        entries[provider] = record(after: previous(entries[provider]), failure: failure, retryAfter: retryAfter, now: now)
    }

    /// The record after a failure at `now`, given the one before it.
    ///
    /// - No record, one that ended more than `longest` seconds ago (a new outage, however many
    ///   failures the last one had), or one ending more than `ceiling(of:)` from now (the
    ///   clock went back): the first failure, a pause of 1 s (or the `Retry-After`).
    /// - A pause still running: a call that was already on its way when another worker's failure
    ///   began it. The same outage, not one more failure in a row: the count stays, and the pause
    ///   ends at the later of its end and this failure's (and keeps whether a `Retry-After`
    ///   lengthened it), so a 429's `Retry-After` is never cut short by another call's shorter
    ///   pause; the newest failure stands for the provider.
    /// - Otherwise (the pause is over and the next call failed): one more failure in a row.
    func record(after previous: Entry?, failure: ProviderFailure, retryAfter: Int?, now: Timestamp) -> Entry {
        func entry(_ failures: Int) -> Entry {
            let length = seconds(afterFailures: failures, retryAfter: retryAfter)
            return Entry(failures: failures, until: now.adding(seconds: length), failure: failure, lengthened: length > longest)
        }
        guard let previous, now.seconds - previous.until.seconds <= longest,
            previous.until.seconds - now.seconds <= ceiling(of: previous)
        else {
            return entry(1)
        }
        if now < previous.until {
            // The newest failure stands for the provider; the end and whether a Retry-After
            // lengthened it come from whichever set the later end.
            var next = entry(previous.failures)
            if previous.until > next.until {
                next.until = previous.until
                next.lengthened = previous.lengthened
            }
            return next
        }
        return entry(min(previous.failures + 1, ProviderPause.mostFailures))
    }

    /// Records a successful call: the provider's failures are forgotten.
    public mutating func succeeded(_ provider: String) {
        probes[provider] = nil
        entries[provider] = nil
        if let board, board.pause(of: provider) != nil { board.update(provider) { _ in nil } }
    }
}

extension ProviderCooldowns.Entry {
    /// The entry as a board keeps it, its failure in 24 bits: the case in the low 8, an HTTP
    /// status in the 15 above, and at the top whether a `Retry-After` lengthened the pause (the
    /// `Retry-After` itself is in `until` already).
    var shared: ProviderPause {
        let code: UInt32 =
            switch failure {
            case .timeout: 1
            case .transport: 2
            case .httpStatus(let status, _): 3 | UInt32(min(max(status, 0), 0x7FFF)) << 8
            case .providerError: 4
            case .unparseable: 5
            case .notCovered: 6
            case .coolingDown: 7
            case .tls: 8
            case .notJSON: 9
            case .outOfTime: 10  // pauses nobody, so never on a board
            }
        return ProviderPause(failures: failures, until: until, failure: code | (lengthened ? Self.lengthenedBit : 0))
    }

    /// The top of the 24 bits: the pause was lengthened by a `Retry-After`.
    static let lengthenedBit: UInt32 = 1 << 23

    init(shared pause: ProviderPause) {
        let failure: ProviderFailure =
            switch pause.failure & 0xFF {
            case 1: .timeout
            case 3: .httpStatus(Int(pause.failure >> 8 & 0x7FFF), retryAfter: nil)
            case 4: .providerError
            case 5: .unparseable
            case 6: .notCovered
            case 7: .coolingDown
            case 8: .tls
            case 9: .notJSON
            case 10: .outOfTime
            default: .transport
            }
        self.init(failures: pause.failures, until: pause.until, failure: failure, lengthened: pause.failure & Self.lengthenedBit != 0)
    }
}
