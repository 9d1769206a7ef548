import CSQLite
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// The rate buckets of every worker on the machine, in shared memory: a table of 16,384 slots
/// (256 KiB) mapped from the `-writer` file, after its page (`WriterLock`). A slot is a bucket key's hash
/// and its GCRA state (the TAT, in milliseconds); a process-shared, robust mutex guards the whole
/// table, held for a probe and some arithmetic (microseconds; the clean-up's scan, once a day,
/// takes it per chunk of 1,024 slots).
///
/// Before, every take was a SQLite write transaction: a bucket leased by no worker (a user's own
/// few requests an hour, which is nearly every bucket in production) cost a cached weather request
/// a turn in the writers' queue and a WAL frame. SQLite's `weather_rate_limits` remains the store
/// of a connection without the table (a read-only folder, a full disk when the file was made) and
/// of a take while a stopped process holds the table's lock, and of other stores.
///
/// A bucket whose TAT is not after now is full, exactly as if it had never been taken from
/// (`GCRA.plausible`), so its slot may be given to another key: the table only has to hold the
/// buckets taken from within the last window (an hour), and most far less: a bucket taken from
/// once is full again after one interval (30 s for a session's 120 an hour), so the buckets live
/// at once are those of the clients of the last minutes. About 11,000–12,000 fit before a probe window
/// is ever full (a first eviction at about three quarters of the slots in use); the table is
/// sized so that a worker's memory stays small (each touches the pages of the slots it uses).
/// Keys are placed by linear probing within
/// `probes` slots of their hash; a slot is given to another key once its bucket has been full for
/// a minute (`free`), and when none of those slots is, the bucket nearest to full is forgotten
/// (`evictions`): that bucket is full again, a key gaining at most what it had spent.
/// Hashes are FNV-1a over the key with a per-file random seed, so no client can aim at another's
/// slot: keys are partly chosen by clients (addresses).
///
/// A TAT more than the longest window (an hour) and a minute ahead was written under a clock since
/// set back: that bucket counts as full, as `GCRA.plausible` says, and its slot may be reused, or
/// a month's step would leave its slots looking live, pushing out real buckets, for a month.
///
/// Region layout (from `offset` in the file): magic (0..<8), seed (8..<16), evictions (16..<24),
/// slot count (24..<32), lock misses (32..<40) and the last one's time (40..<48, both since
/// session 34), mutex (64..<128), boot id (128..<168); slots from 4,096: 16 bytes each,
/// hash (0 = never used) then TAT. A table of another slot count (another release) is left alone:
/// its workers may still map it, so this process goes without (SQLite) until it is gone.
final class SharedRateTable {
    static let slots = 16_384
    static let probes = 64
    static let headerSize = 4096
    static let size = headerSize + 16 * slots
    private static let magic: UInt64 = 0x636C_6F73_6574_5232  // "closetR2"
    /// How far ahead of now a live bucket's TAT can be: the longest window and a minute of slack.
    static let liveHorizonMs: Int64 = 3_600_000 + Timestamp.slackSeconds * 1000

    /// The file mapped from its start (an offset of 4,096 would not be a page boundary on a kernel
    /// of 16 or 64 KiB pages), and the table within it.
    private let mapping: UnsafeMutableRawPointer, mappedBytes: Int
    private let region: UnsafeMutableRawPointer
    private var mutex: UnsafeMutablePointer<pthread_mutex_t> { (region + 64).assumingMemoryBound(to: pthread_mutex_t.self) }
    private var seed: UInt64 { region.load(fromByteOffset: 8, as: UInt64.self) }
    private var slotWords: UnsafeMutablePointer<UInt64> { (region + Self.headerSize).assumingMemoryBound(to: UInt64.self) }
    /// Buckets forgotten to make room (live, or full for less than a minute), ever, on this file
    /// (`weatherctl stats`: a count that keeps rising says the table is too small for the clients
    /// of the last minutes, each such bucket's key gaining at most what it had spent).
    var evictions: UInt64 { csqlite_atomic_load(headerWord(16)) }
    /// Updates (takes, reads of a bucket, give-backs) that could not have the lock in time, ever,
    /// on this file: a stopped process held it, and the take or read went to SQLite, the
    /// give-back nowhere (`weatherctl stats`; each worker's connection counts one wait and then
    /// its tries). Older releases leave the word zero.
    var lockMisses: UInt64 { csqlite_atomic_load(headerWord(32)) }
    /// When the last of `lockMisses` happened (the missing update's `now`, in milliseconds); 0
    /// when none has: the count is the file's whole life, so an operator needs to know whether
    /// the stopped process is still there.
    var lastLockMissMs: Int64 { Int64(bitPattern: csqlite_atomic_load(headerWord(40))) }
    /// The header's 8-byte word at `offset` (the layout above).
    private func headerWord(_ offset: Int) -> UnsafeMutablePointer<UInt64> { (region + offset).assumingMemoryBound(to: UInt64.self) }
    /// This connection's last wait for the lock timed out (a holder stopped, not dead), and it has
    /// not had the lock since: until it has, it only tries, so that one stopped process costs each
    /// worker one second, not one per take. Kept per connection (a worker has one; a reopened
    /// connection waits once more); under plain CGI each request is a process of its own, so each
    /// weather request waits the second. A take inside a write transaction waits 50 ms at most.
    private var holderSeemsStuck = false

    /// Why a connection has no table, and counts its rate buckets in SQLite instead: said by a
    /// worker at start and by `weatherctl stats` and `check`.
    enum Unavailable: Error, Equatable {
        /// The disk had no room to extend the `-writer` file for it (or the user's quota).
        case noRoom
        /// The file could not be extended for it for another reason (an I/O error, say).
        case notExtended
        /// The file could not be mapped.
        case notMapped
        /// The file holds a table of another layout or size (another release's), left to it.
        case otherLayout
        /// Its process-shared mutex could not be set up.
        case noMutex

        var reason: String {
            switch self {
            case .noRoom: "the disk had no room to extend the -writer file beside the database for it"
            case .notExtended: "the -writer file beside the database could not be extended for it"
            case .notMapped: "the -writer file beside the database could not be mapped"
            case .otherLayout:
                "the -writer file beside the database holds another release's table (left alone, as that release's workers may use it; with the service stopped, removing the -writer file lets the next start make this release's)"
            case .noMutex: "its process-shared lock could not be set up"
            }
        }
    }

    /// Maps the table at `offset` of the open file `fd`, setting it up when the file has none yet,
    /// and its mutex afresh when the machine booted since (`boot`, as the page records it: a mutex
    /// left locked by a process of the last boot would look held for ever; the buckets, wall-clock
    /// times, are kept). A process that cannot read the boot id never sets the mutex up again
    /// over a table in use. The caller holds the file's `flock`, so one process sets it up and the
    /// others find it ready. Fails when the disk has no room for it, the mapping fails or the file
    /// holds a table of another geometry: the caller goes on without.
    static func map(fd: Int32, offset: Int, boot: [UInt8]) -> Result<SharedRateTable, Unavailable> {
        // Blocks for the whole table, unless the file has them all: a sparse region, as a copy of
        // the file may be, would kill the process with SIGBUS on a full disk.
        // The file never shrinks: another process may map all of it.
        var st = stat()
        guard fstat(fd, &st) == 0 else { return .failure(.notMapped) }
        let allocated = st.st_size >= offset + size && Int(st.st_blocks) * 512 >= offset + size
        if !allocated {
            let rc = posix_fallocate(fd, 0, off_t(offset + size))  // an errno, not -1
            guard rc == 0 else { return .failure(rc == ENOSPC || rc == EDQUOT ? .noRoom : .notExtended) }
        }
        guard let p = mmap(nil, offset + size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), p != MAP_FAILED else { return .failure(.notMapped) }
        let table = SharedRateTable(mapping: p, bytes: offset + size, offset: offset)
        let header = table.region
        let recordedBoot = UnsafeMutableRawBufferPointer(start: header + 128, count: 40)
        switch header.load(as: UInt64.self) {
        case magic:
            guard header.load(fromByteOffset: 24, as: UInt64.self) == UInt64(slots) else { return .failure(.otherLayout) }
            if !boot.isEmpty, !recordedBoot.starts(with: boot) {
                guard table.initialiseMutex() else { return .failure(.noMutex) }
                recordedBoot.copyBytes(from: boot + [UInt8](repeating: 0, count: 40 - boot.count))
            }
            return .success(table)
        case 0:
            // Never set up: the region is what `posix_fallocate` added past the page, zeros, so
            // no slot needs writing (setting up writes none), and the magic comes last.
            var random: UInt64 = 0
            if getrandom(&random, 8, 0) != 8 { random = UInt64(UInt(bitPattern: time(nil))) ^ UInt64(getpid()) << 32 }
            header.storeBytes(of: random, toByteOffset: 8, as: UInt64.self)
            header.storeBytes(of: UInt64(slots), toByteOffset: 24, as: UInt64.self)
            recordedBoot.copyBytes(from: boot + [UInt8](repeating: 0, count: 40 - boot.count))
            guard table.initialiseMutex() else { return .failure(.noMutex) }
            header.storeBytes(of: magic, as: UInt64.self)
            return .success(table)
        default:
            return .failure(.otherLayout)  // left to whoever made it
        }
    }

    private init(mapping: UnsafeMutableRawPointer, bytes: Int, offset: Int) {
        self.mapping = mapping
        mappedBytes = bytes
        region = mapping + offset
    }

    deinit { munmap(mapping, mappedBytes) }

    private func initialiseMutex() -> Bool { WriterLock.initialiseSharedMutex(mutex) }

    /// Reads the buckets of `keys` (nil: full) and stores what `change` makes of them (nil for a
    /// key: left as it is), all under the table's lock. false, with nothing read or changed, when
    /// the lock could not be had (within a second, or at once after such a wait timed out and
    /// until this process has it again): the caller uses SQLite instead.
    /// Without `waiting` (inside a write transaction, where every other writer waits for this
    /// one), the lock is waited for 50 ms at most, never a second.
    func update(_ keys: [String], nowMs: Int64, waiting: Bool = true, _ change: ([Int64?]) -> [Int64?]) -> Bool {
        update(hashes: keys.map(hash), nowMs: nowMs, waiting: waiting, change)
    }

    /// `update` by the keys' hashes (tests choose hashes that share slots).
    func update(hashes: [UInt64], nowMs: Int64, waiting: Bool = true, _ change: ([Int64?]) -> [Int64?]) -> Bool {
        guard lock(waiting: waiting) else {
            csqlite_atomic_increment(headerWord(32))
            csqlite_atomic_store(headerWord(40), UInt64(max(0, nowMs)))
            return false
        }
        defer { pthread_mutex_unlock(mutex) }
        var slots = hashes.map(find)
        let stored = slots.map { $0.flatMap { Self.live(Int64(bitPattern: slotWords[2 * $0 + 1]), nowMs: nowMs) } }
        let changed = change(stored)
        for (i, tat) in changed.enumerated() {
            guard let tat, i < hashes.count else { continue }
            if slots[i] == nil {
                // A new slot, never one another key of this call holds (found, or placed just
                // now), and the same for every copy of this key in the call (equal hashes find
                // alike, so none of them had one).
                slots[i] = place(hashes[i], nowMs: nowMs, sparing: slots)
                for j in slots.indices where hashes[j] == hashes[i] { slots[j] = slots[i] }
            }
            guard let slot = slots[i] else { continue }
            slotWords[2 * slot + 1] = UInt64(bitPattern: tat)
            slotWords[2 * slot] = hashes[i]
        }
        return true
    }

    /// Takes the lock: waits up to a second, or only tries while `holderSeemsStuck`. A holder that
    /// died left it "owner dead" and it is taken over: that holder was storing into slots, so at
    /// worst one slot holds one key's hash with another's TAT, or a take's buckets are half
    /// stored (one bucket off by a take).
    private func lock(waiting: Bool = true) -> Bool {
        var rc = pthread_mutex_trylock(mutex)
        if rc == EBUSY, holderSeemsStuck {
            for _ in 0..<64 where rc == EBUSY {
                sched_yield()
                rc = pthread_mutex_trylock(mutex)
            }
        } else if rc == EBUSY {
            // Inside a write transaction 50 ms at most: a holder's ordinary turn is microseconds
            // (the clean-up's scan holds it for a chunk at a time), and any longer is a holder
            // stopped, whom every other writer would wait for too. Given up, it is one.
            rc = waiting ? csqlite_mutex_lock_within(mutex, 1) : csqlite_mutex_lock_within_ms(mutex, 50)
            holderSeemsStuck = rc == ETIMEDOUT
        }
        if rc == EOWNERDEAD {
            pthread_mutex_consistent(mutex)
            rc = 0
        }
        if rc == 0 { holderSeemsStuck = false }
        return rc == 0
    }

    /// Whether a slot's bucket may be given to another key or forgotten: full since a minute ago
    /// (a request's `now` is taken when it arrives, so one a few seconds older may still find the
    /// bucket live: `GCRA.plausible`'s slack), or written under a clock since set back.
    private static func free(_ tat: Int64, nowMs: Int64) -> Bool {
        tat <= nowMs - Timestamp.slackSeconds * 1000 || tat > nowMs + liveHorizonMs
    }

    /// `tat` when it is a live bucket's: after now, and not so far ahead that only a clock since
    /// set back could have written it.
    private static func live(_ tat: Int64, nowMs: Int64) -> Int64? {
        tat > nowMs && tat <= nowMs + liveHorizonMs ? tat : nil
    }

    /// Forgets every bucket that is full again, so that no lapsed bucket's hash stays in the file
    /// until its slot happens to be reused (the privacy notice promises per-address records are
    /// deleted by the clean-up). A forgotten slot keeps a mark (`forgotten`) in place of the hash,
    /// so that probing still passes over it to the keys placed beyond. Returns how many it
    /// forgot; nil when the lock could not be had (the next clean-up does it).
    func forgetLapsed(nowMs: Int64) -> Int? {
        var forgotten = 0
        // A chunk of slots per turn of the lock, so that no take waits for the whole scan (a
        // take inside a write transaction waits 50 ms at most; a debug build scans slowly).
        for chunk in stride(from: 0, to: Self.slots, by: 1024) {
            guard lock() else { return nil }
            defer { pthread_mutex_unlock(mutex) }
            for slot in chunk..<chunk + 1024 {
                let owner = slotWords[2 * slot]
                guard owner != 0, owner != Self.forgotten, Self.free(Int64(bitPattern: slotWords[2 * slot + 1]), nowMs: nowMs) else { continue }
                slotWords[2 * slot] = Self.forgotten
                slotWords[2 * slot + 1] = 0
                forgotten += 1
            }
        }
        return forgotten
    }

    /// The mark of a slot whose bucket was forgotten: no key hashes to it (`hash`).
    static let forgotten = UInt64.max

    /// Tests only: takes the table's lock and keeps it (a process killed or stopped meanwhile).
    func holdLock() -> Bool { pthread_mutex_lock(mutex) == 0 }
    /// Tests only: lets go of a lock `holdLock` took.
    func releaseLock() { pthread_mutex_unlock(mutex) }

    /// The buckets live now (taken from, not yet full again), read without the lock (no take
    /// waits for an operator's count; each word is read whole): a count for `weatherctl stats`,
    /// which takes made meanwhile may move by a few.
    func liveBuckets(nowMs: Int64) -> Int {
        (0..<Self.slots).reduce(0) { count, slot in
            let owner = csqlite_atomic_load(slotWords + 2 * slot)
            guard owner != 0, owner != Self.forgotten else { return count }
            return count + (Self.live(Int64(bitPattern: csqlite_atomic_load(slotWords + 2 * slot + 1)), nowMs: nowMs) == nil ? 0 : 1)
        }
    }

    /// Slots holding a bucket, live or full (tests).
    var usedSlots: Int {
        guard lock() else { return -1 }
        defer { pthread_mutex_unlock(mutex) }
        return (0..<Self.slots).reduce(0) { $0 + (slotWords[2 * $1] == 0 || slotWords[2 * $1] == Self.forgotten ? 0 : 1) }
    }

    /// The slot holding `hash`, nil when none does.
    private func find(_ hash: UInt64) -> Int? {
        let mask = Self.slots - 1
        for step in 0..<Self.probes {
            let slot = (Self.home(hash) &+ step) & mask
            let owner = slotWords[2 * slot]
            if owner == hash { return slot }
            if owner == 0 { return nil }  // slots are taken in probe order and never emptied
        }
        return nil
    }

    /// A slot for `hash`, which holds none, other than those in `sparing` (the other keys of the
    /// same update): the first never used, else the first whose bucket is full (its TAT not after
    /// now, or implausibly far ahead), else the one nearest to full, whose bucket is forgotten.
    private func place(_ hash: UInt64, nowMs: Int64, sparing: [Int?]) -> Int? {
        let mask = Self.slots - 1
        var nearest: Int?, nearestTAT = Int64.max
        for step in 0..<Self.probes {
            let slot = (Self.home(hash) &+ step) & mask
            guard !sparing.contains(slot) else { continue }
            if slotWords[2 * slot] == 0 { return slot }
            let tat = Int64(bitPattern: slotWords[2 * slot + 1])
            if Self.free(tat, nowMs: nowMs) { return slot }
            if tat < nearestTAT { (nearest, nearestTAT) = (slot, tat) }
        }
        if nearest != nil { csqlite_atomic_increment(headerWord(16)) }
        return nearest
    }

    /// Where probing for `hash` starts: its high bits folded in, as FNV's low bits mix least.
    private static func home(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash ^ hash >> 29) }

    /// FNV-1a of the key, begun from the file's seed; never 0, which marks a slot never used, nor
    /// `forgotten`.
    private func hash(_ key: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ seed
        for byte in key.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return h == 0 ? 1 : h == Self.forgotten ? h - 1 : h
    }
}
