import WeatherCore

/// In-memory counters and `last_seen_at` touches of one worker, written at most every
/// `flushInterval` seconds (after the response is sent) and when the worker exits. Touches go in
/// chunks of `touchesPerFlush`, one chunk after each response until none are left.
public final class Metrics {
    private var counters = Counters()
    private var seen: [String: Timestamp] = [:]
    private var lastFlush: Timestamp?
    let flushInterval: Int64

    /// Counters written at most every `flushInterval` seconds (0: after every response).
    public init(flushInterval: Int64) { self.flushInterval = flushInterval }

    /// Adds `n` to counter `name` for the hour of `t`; written at the next flush.
    public func count(_ name: String, at t: Timestamp, _ n: Int64 = 1) { counters.add(name, at: t, n) }

    /// Notes that a session was used; stored only when the database copy is older than the interval.
    func sawSession(_ id: String, lastSeenAt: Timestamp, now: Timestamp) {
        if now.seconds - lastSeenAt.seconds >= max(flushInterval, 60) { seen[id] = now }
    }

    /// How a due flush's write of the counters went.
    public enum FlushState {
        case written
        case failed(StoreError)
    }

    /// Notes that a session was used just now, whatever its stored `last_seen_at` (a refresh).
    func touched(_ id: String, at now: Timestamp) { seen[id] = now }

    /// Writes what is pending when the interval has passed (or `force`), and says how the
    /// counters' write went; nil when it was not due. Storage errors keep the batch for the next
    /// try: counts are never dropped for a momentary lock.
    @discardableResult
    public func flushIfDue(to store: any GatewayStore, now: Timestamp, force: Bool = false) -> FlushState? {
        if lastFlush == nil { lastFlush = now }
        let since = now.seconds - (lastFlush?.seconds ?? 0)
        // A clock set back (since < 0) flushes now rather than after it has caught up again.
        guard force || since >= flushInterval || since < 0 else {
            if touchBacklog { touchSomeSessions(store) }
            return nil
        }
        lastFlush = now
        let batch = counters.drain()
        let state: FlushState
        do {
            try store.addCounters(batch)
            state = .written
        } catch {
            for (k, v) in batch { counters.add(k.name, at: Timestamp(iso8601: k.hour + ":00:00Z") ?? now, v) }
            state = .failed(error)
        }
        touchSomeSessions(store)
        // Stopping: everything, chunk by chunk, unless the database refuses.
        while force, touchBacklog, touchSomeSessions(store) {}
        return state
    }

    /// At most this many `last_seen_at` updates per flush: one transaction of them must stay short,
    /// because every other writer waits for it (thousands of random rows took a quarter second).
    static let touchesPerFlush = 64
    /// True while touches are left over from a flush: the next responses go on with them.
    private var touchBacklog = false
    /// The touches being written, in session-id order, and how many of them are written.
    ///
    /// Session ids begin with their creation time, so neighbouring ids are neighbouring rows:
    /// taken in id order, a chunk of 64 sessions created around the same time (a burst of new
    /// installs refreshing together, the benchmarks' seeded sessions) shares a few pages of the
    /// table and its id index instead of touching 64 random ones. The backlog is sorted once when
    /// a round of writing starts; touches noted meanwhile wait for the next round.
    private var writing: [(id: String, at: Timestamp)] = []
    private var written = 0

    /// Writes one chunk; false when the store refused it (kept for the next try).
    @discardableResult
    private func touchSomeSessions(_ store: any GatewayStore) -> Bool {
        if writing.isEmpty {
            guard !seen.isEmpty else {
                touchBacklog = false
                return true
            }
            // Session ids are ASCII, for which `<` is byte order, compared with `memcmp`; walking
            // two UTF8Views was 16,000 instructions a refresh (callgrind, session 7).
            writing = seen.map { (id: $0.key, at: $0.value) }.sorted { $0.id < $1.id }
            written = 0
            seen.removeAll(keepingCapacity: true)
        }
        let end = min(written + Self.touchesPerFlush, writing.count)
        let chunk = Dictionary(uniqueKeysWithValues: writing[written..<end].map { ($0.id, $0.at) })
        guard (try? store.touchSessions(chunk)) != nil else { return false }
        written = end
        if written >= writing.count {
            writing = []
            written = 0
        }
        touchBacklog = !writing.isEmpty || !seen.isEmpty
        return true
    }
}
