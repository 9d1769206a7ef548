import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// The rate buckets every worker of a machine shares, in the `-writer` file (`SharedRateTable`):
/// a take is no SQLite write, two stores on one database draw from one bucket, a store without
/// the file keeps its buckets in SQLite with the same decisions, and a table that overflows keeps
/// the buckets furthest from full.
@Suite struct SharedRateTableTests {
    let nowMs: Int64 = 1_796_000_000_000

    func databasePath() throws -> String {
        try scratchDirectory("cw-rates").appendingPathComponent("w.sqlite3").path
    }

    func bucket(_ key: String, limit: Int = 2) -> LimitBucket { LimitBucket(key: key, quota: Quota(limit: limit, window: 3600)) }

    func isRefused(_ grant: LimitGrant) -> Bool {
        if case .refused = grant { return true }
        return false
    }

    /// With another connection holding SQLite's write lock all along (any write would wait for
    /// it, then fail with 503), two workers' stores serve a bucket of two exactly twice between
    /// them, refuse the third with the bucket's wait, and no row is written.
    @Test func aTakeIsNoWriteAndTwoStoresShareTheBucket() throws {
        let path = try databasePath()
        let a = try SQLiteGatewayStore(path: path), b = try SQLiteGatewayStore(path: path)
        #expect(a.db.rateTable != nil)
        let holder = try Database(path: path)
        try holder.execute("BEGIN IMMEDIATE")
        let clock = ContinuousClock(), started = clock.now
        let ip = bucket("weather_ip:203.0.113.9")
        #expect(try a.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        #expect(try b.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        #expect(try a.take([ip], extra: [0], nowMs: nowMs) == .refused(retryAfter: 1800, bucket: ip.key))
        #expect(try b.wait(for: ip, nowMs: nowMs) == 1800)
        #expect(clock.now - started < .seconds(1), "no take waited for the writer")
        try holder.execute("ROLLBACK")
        #expect(try a.db.scalarInt("SELECT count(*) FROM weather_rate_limits") == 0)
        // Half an hour on, one unit is back (2 an hour).
        #expect(try b.take([ip], extra: [0], nowMs: nowMs + 1_800_000) == .granted([1]))
    }

    /// A request draws from all its buckets or from none: a refusal by the second leaves the first
    /// as it was, and the wait is the longest of the refusing buckets'. Given back, leased units
    /// are as if never taken. The same on SQLite (a store without the `-writer` file), where the
    /// buckets are rows.
    @Test(arguments: [true, false]) func aRequestDrawsFromAllItsBucketsOrNone(shared: Bool) throws {
        let path = try databasePath()
        let migrated = try SQLiteGatewayStore(path: path)
        let s = shared ? migrated : SQLiteGatewayStore(database: try Database(path: path), attachingWriterPage: false)
        #expect((s.db.rateTable != nil) == shared)
        let session = bucket("weather_session:aws_1", limit: 10), ip = bucket("weather_ip:198.51.100.1", limit: 1)
        #expect(try s.take([session, ip], extra: [0, 0], nowMs: nowMs) == .granted([1, 1]))
        let before = try s.rateState(session.key, nowMs: nowMs)
        #expect(before == nowMs + 360_000)
        #expect(try s.take([session, ip], extra: [0, 0], nowMs: nowMs) == .refused(retryAfter: 3600, bucket: ip.key))
        #expect(try s.rateState(session.key, nowMs: nowMs) == before, "the refused request took from the session's bucket")

        let busy = bucket("legacy_ip:198.51.100.2", limit: 10_000)
        #expect(try s.take([busy], extra: [255], nowMs: nowMs) == .granted([256]))  // a lease: one unit and 255 ahead
        try s.giveBack([(bucket: busy, units: 255)], nowMs: nowMs)
        #expect(try s.rateState(busy.key, nowMs: nowMs) == nowMs + 360, "one unit of 0.36 s spent, the rest given back")
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_rate_limits") == (shared ? 0 : 3))
    }

    /// A full bucket's slot is used again, and when every slot a key may use holds a live bucket,
    /// the one nearest to full is forgotten: a bucket spent for the hour survives more others
    /// taken from once than the table has slots.
    @Test func anOverflowingTableForgetsTheBucketsNearestToFull() throws {
        let s = try SQLiteGatewayStore(path: try databasePath())
        let table = try #require(s.db.rateTable)
        let spent = bucket("weather_session:aws_spent", limit: 1)
        #expect(try s.take([spent], extra: [0], nowMs: nowMs) == .granted([1]))
        let keys = SharedRateTable.slots + SharedRateTable.slots / 8
        for i in 0..<keys { _ = try s.take([bucket("weather_ip:10.\(i >> 16).\(i >> 8 & 255).\(i & 255)", limit: 1000)], extra: [0], nowMs: nowMs) }
        let evicted = table.evictions
        #expect(evicted >= UInt64(keys - SharedRateTable.slots), "every key past the table's size forgot a bucket")
        #expect(try s.rateState(spent.key, nowMs: nowMs) == nowMs + 3_600_000)
        #expect(isRefused(try s.take([spent], extra: [0], nowMs: nowMs)), "the spent bucket was forgotten")
        // 70 seconds on, every bucket of 3.6 s has been full for over a minute: its slot serves a new key.
        for i in 0..<SharedRateTable.slots / 2 {
            _ = try s.take([bucket("weather_ip:11.\(i >> 16).\(i >> 8 & 255).\(i & 255)", limit: 1000)], extra: [0], nowMs: nowMs + 70_000)
        }
        #expect(table.evictions == evicted, "a live bucket was forgotten while full ones held slots")
        #expect(isRefused(try s.take([spent], extra: [0], nowMs: nowMs + 70_000)))
    }

    /// Two keys of one take never share a slot: a key that is new may not be given the slot of
    /// another key of the same take, even when that key's bucket is full (a review found the
    /// first version placing the new key there, and the other key's TAT overwriting it). Keys
    /// are given by hash here: 5 and 16,389 start probing at the same slot.
    @Test func twoKeysOfOneTakeKeepTheirOwnSlots() throws {
        let s = try SQLiteGatewayStore(path: try databasePath())
        let table = try #require(s.db.rateTable)
        let a: UInt64 = 5, b: UInt64 = 5 + UInt64(SharedRateTable.slots)
        #expect(table.update(hashes: [b], nowMs: nowMs) { _ in [nowMs + 10] })  // b's bucket, in a's first slot
        let later = nowMs + 100  // b's bucket is full again
        #expect(table.update(hashes: [a, b], nowMs: later) { _ in [later + 1_000, later + 2_000] })
        var seen: [Int64?] = []
        #expect(
            table.update(hashes: [a, b], nowMs: later) { tats in
                seen = tats
                return [nil, nil]
            })
        #expect(seen == [later + 1_000, later + 2_000])
    }

    /// A bucket written under a clock since set back (a TAT a month ahead) counts as full, and its
    /// slot is reused rather than kept as live: kept, such slots pushed out real buckets for the
    /// whole step (a review).
    @Test func aBucketFromAClockSetBackIsFullAndItsSlotReused() throws {
        let s = try SQLiteGatewayStore(path: try databasePath())
        let table = try #require(s.db.rateTable)
        let a: UInt64 = 7, b: UInt64 = 7 + UInt64(SharedRateTable.slots)
        let month: Int64 = 30 * 86_400_000
        #expect(table.update(hashes: [a], nowMs: nowMs + month) { _ in [nowMs + month + 3_600_000] })
        var seen: [Int64?] = [0]
        #expect(
            table.update(hashes: [a], nowMs: nowMs) { tats in
                seen = tats
                return [nil]
            })
        #expect(seen == [nil], "a bucket from a month ahead is full now")
        #expect(table.update(hashes: [b], nowMs: nowMs) { _ in [nowMs + 1_000] })
        #expect(table.usedSlots == 1, "b took a's slot")
        #expect(table.evictions == 0)
    }

    /// The clean-up forgets the buckets that are full again, so no lapsed address's hash stays in
    /// the file until its slot is reused; a live bucket stays, and a key placed beyond a forgotten
    /// slot is still found. Both clean-ups: `prune` (weatherctl) and a worker's `pruneIfDue`,
    /// whose own run is on a connection without the table.
    @Test func theCleanUpForgetsLapsedBucketsAndKeepsLiveOnes() throws {
        let s = try SQLiteGatewayStore(path: try databasePath())
        let table = try #require(s.db.rateTable)
        let a: UInt64 = 9, b: UInt64 = 9 + UInt64(SharedRateTable.slots)  // b lands in the slot after a's
        #expect(table.update(hashes: [a, b], nowMs: nowMs) { _ in [nowMs + 1_000, nowMs + 7_200_000 - 60_000] })
        let live = bucket("weather_session:aws_live", limit: 1)
        #expect(try s.take([live], extra: [0], nowMs: nowMs + 3_000_000) == .granted([1]))
        let later = Timestamp(seconds: (nowMs + 3_600_000) / 1000)
        _ = try s.prune(now: later, policy: PrunePolicy(), dryRun: false)
        #expect(table.usedSlots == 2, "a's bucket (full again) forgotten, b's and the live one kept")
        var seen: [Int64?] = []
        #expect(
            table.update(hashes: [b], nowMs: later.seconds * 1000) { tats in
                seen = tats
                return [nil]
            })
        #expect(seen == [nowMs + 7_200_000 - 60_000], "b is found past a's forgotten slot")
        #expect(isRefused(try s.take([live], extra: [0], nowMs: later.seconds * 1000)))

        // A worker's own clean-up, at the next interval: everything is full again by then.
        let due = try s.pruneIfDue(now: Timestamp(seconds: later.seconds + 2 * 86_400), interval: 3600, policy: PrunePolicy())
        #expect(due != nil)
        #expect(table.usedSlots == 0)
    }

    /// A worker killed while it held the table's lock leaves it "owner dead", and the next take
    /// takes it over at once. One stopped while holding it (SIGSTOP, a debugger) costs a take a
    /// second's wait, after which the take is served from SQLite, and the worker's later takes
    /// only try until they get the lock: a request is never refused or failed for it.
    @Test func aDeadHolderIsTakenOverAndAStoppedOneCostsASecondAndSQLite() throws {
        let path = try databasePath()
        let s = try SQLiteGatewayStore(path: path)
        let table = try #require(s.db.rateTable)
        let ip = bucket("weather_ip:192.0.2.4")
        nonisolated(unsafe) let shared = table
        var holder = pthread_t()
        let context = Unmanaged.passRetained(shared).toOpaque()
        #expect(
            pthread_create(
                &holder, nil,
                { raw in
                    _ = Unmanaged<SharedRateTable>.fromOpaque(raw!).takeRetainedValue().holdLock()
                    return nil
                }, context) == 0)
        pthread_join(holder, nil)  // ended holding it: the kernel marks it "owner dead"
        let clock = ContinuousClock()
        var started = clock.now
        #expect(try s.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        #expect(clock.now - started < .milliseconds(500), "the dead holder's lock was waited for")
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_rate_limits") == 0)

        let taken = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        Thread {
            _ = shared.holdLock()
            taken.signal()
            release.wait()
            shared.releaseLock()
            finished.signal()
        }.start()
        taken.wait()
        started = clock.now
        #expect(try s.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        let waited = clock.now - started
        #expect(waited >= .milliseconds(900) && waited < .seconds(3), "\(waited)")
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_rate_limits") == 1, "served from SQLite")
        // The next take only tries, as long as the holder stays: one second per worker, not per take.
        started = clock.now
        #expect(try s.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        #expect(clock.now - started < .milliseconds(500), "waited again for a holder that stays")
        // A creation's charge, taken inside its write transaction (every other writer waiting),
        // never waits for the holder, not even the once: a review found it waited the second.
        let fresh = try SQLiteGatewayStore(path: path)
        let now = Timestamp(seconds: nowMs / 1000)
        let pair = IssuedPair(
            accessRowId: "wst_a1", accessHash: "access-hash-1", refreshRowId: "wst_r1", refreshHash: "refresh-hash-1",
            lifetimes: TokenLifetimes(now: now, policy: TokenPolicy()))
        let creator = bucket("create_ip:192.0.2.5")
        started = clock.now
        #expect(
            try fresh.createSession(
                NewSession(id: "aws_00000000000000000001", installationIdHash: "inst", platform: "ios", appVersion: nil, createdAt: now), tokens: pair,
                charging: LimitCharge(buckets: [creator], extra: [0], nowMs: nowMs)) == .granted([1]))
        #expect(clock.now - started < .milliseconds(500), "a creation waited for the table's holder")
        #expect(try fresh.db.scalarInt("SELECT count(*) FROM weather_rate_limits WHERE bucket_key = ?1", [.text(creator.key)]) == 1)
        // A lease given back meanwhile is dropped, never credited to SQLite's rows.
        try s.giveBack([(bucket: ip, units: 1)], nowMs: nowMs)
        #expect(try s.db.scalarInt("SELECT tat_ms FROM weather_rate_limits WHERE bucket_key = ?1", [.text(ip.key)]) == nowMs + 2 * 1_800_000)
        // Four went without the table (two takes, the creation's, the give-back), and operators
        // are told (`weatherctl stats`).
        let said = s.rateBuckets(now: Timestamp(seconds: nowMs / 1000))
        guard case .sharedTable(let t) = said, t.lockMisses == 4, t.lastLockMiss == Timestamp(seconds: nowMs / 1000) else {
            Issue.record("\(said)")
            return
        }
        #expect(
            said.summary.hasSuffix(
                "; 4 takes, reads or give-backs went without it since it was made, because another process held its lock too long (a stopped one), the last at \(Timestamp(seconds: nowMs / 1000).iso8601))"
            ), "\(said.summary)")
        release.signal()
        finished.wait()
        // Once the holder lets go, the table serves again (and waits again when it must).
        #expect(try s.take([ip], extra: [0], nowMs: nowMs) == .granted([1]))
        #expect(try s.db.scalarInt("SELECT count(*) FROM weather_rate_limits WHERE bucket_key = ?1", [.text(ip.key)]) == 1)
    }

    /// A `-writer` file of an older release (the page alone) gains the table, and a page opened
    /// again finds the buckets there.
    @Test func anOlderPageGainsTheTableAndItOutlivesAnOpening() throws {
        let path = try databasePath() + "-writer"
        do {
            let first = try #require(WriterLock(path: path))
            #expect(first.rates != nil)
        }
        #expect(truncate(path, 4096) == 0)
        do {
            let lock = try #require(WriterLock(path: path))
            let rates = try #require(lock.rates)
            #expect(rates.update(["k"], nowMs: nowMs) { _ in [nowMs + 5] })
        }
        var st = stat()
        #expect(stat(path, &st) == 0 && Int(st.st_size) == 4096 + SharedRateTable.size)
        let again = try #require(WriterLock(path: path)?.rates)
        var seen: Int64?
        #expect(
            again.update(["k"], nowMs: nowMs) { tats in
                seen = tats[0]
                return [nil]
            })
        #expect(seen == nowMs + 5)
    }

    /// What operators are told (`weatherctl stats` and `check`, a worker's start): the buckets
    /// live in the table now, none forgotten while it has room; a file holding another release's
    /// table (its slot count, or another layout) leaves the store counting in the database, and
    /// says so with why, where it went without a word before.
    @Test func theStoreSaysWhereItCountsAndHowFull() throws {
        let path = try databasePath()
        let store = try SQLiteGatewayStore(path: path)
        let now = Timestamp(seconds: nowMs / 1000)
        #expect(store.rateBuckets(now: now) == .sharedTable(RateTableState(slots: 16_384, live: 0, forgottenForRoom: 0, lockMisses: 0, lastLockMiss: nil)))
        for i in 0..<40 { _ = try store.take([bucket("weather_ip:192.0.2.\(i)")], extra: [0], nowMs: nowMs) }
        #expect(store.rateBuckets(now: now) == .sharedTable(RateTableState(slots: 16_384, live: 40, forgottenForRoom: 0, lockMisses: 0, lastLockMiss: nil)))
        // Two an hour: each bucket is full again after half an hour.
        #expect(
            store.rateBuckets(now: now.adding(seconds: 1800))
                == .sharedTable(RateTableState(slots: 16_384, live: 0, forgottenForRoom: 0, lockMisses: 0, lastLockMiss: nil)))

        // A process that could not open the file (here: a connection that never attached it)
        // does not know, and says so rather than "in the database".
        let blind = SQLiteGatewayStore(database: try Database(path: path), attachingWriterPage: false)
        guard case .notKnown(let why) = blind.rateBuckets(now: now) else {
            Issue.record("\(blind.rateBuckets(now: now))")
            return
        }
        #expect(why.contains("could not open the -writer file"))

        for (offset, value) in [(4096 + 24, UInt64(65_536)), (4096, UInt64(0x636C_6F73_6574_5233))] {
            let other = try databasePath()
            _ = try SQLiteGatewayStore(path: other)
            let fd = open(other + "-writer", O_RDWR)
            #expect(fd >= 0)
            var word = value
            #expect(pwrite(fd, &word, 8, off_t(offset)) == 8)
            close(fd)
            let reopened = try SQLiteGatewayStore(path: other)
            #expect(reopened.db.rateTable == nil)
            guard case .database(let why) = reopened.rateBuckets(now: now) else {
                Issue.record("counted in a table of another release's layout")
                continue
            }
            #expect(why.contains("another release's table"))
            #expect(reopened.rateBuckets(now: now).summary.hasPrefix("in the database, a write for each take of a quota"))
            #expect(try reopened.take([bucket("weather_ip:192.0.2.1")], extra: [0], nowMs: nowMs) == .granted([1]))
            #expect(try reopened.db.scalarInt("SELECT count(*) FROM weather_rate_limits") == 1)
        }
    }
}
