import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// The rate buckets of every worker on the machine, in shared memory: a table of 16,384 slots
/// (256 KiB) mapped from the `-writer` file, after its page (`WriterLock`). A slot is a bucket key's hash
/// and its GCRA state (the TAT, in milliseconds); a process-shared, robust mutex guards the whole
/// table, held for a probe and some arithmetic (microseconds), never for a system call.
///
/// Before, every take was a SQLite write transaction: a bucket leased by no worker (a user's own
/// few requests an hour, which is nearly every bucket in production) cost a cached weather request
/// a turn in the writers' queue and a WAL frame. SQLite's `weather_rate_limits` remains the store
/// of a connection without the table (a read-only folder, a full disk when the file was made, a
/// table whose mutex a stopped process holds for more than a second) and of other stores.
///
/// A bucket whose TAT is not after now is full, exactly as if it had never been taken from
/// (`GCRA.plausible`), so its slot may be given to another key: the table only has to hold the
/// buckets taken from within the last window (an hour), and most far less: a bucket taken from
/// once is full again after one interval (30 s for a session's 120 an hour), so the buckets live
/// at once are those of the clients of the last minutes. About 12,000 fit before a probe window
/// is ever full (a first eviction at about three quarters of the slots in use); the table is
/// sized so that a worker's memory stays small (each touches the pages of the slots it uses).
/// Keys are placed by linear probing within
/// `probes` slots of their hash; when all of those hold live buckets, the one nearest to full is
/// forgotten (`evictions`): that bucket is full again, a key gaining at most what it had spent.
/// Hashes are FNV-1a over the key with a per-file random seed, so no client can aim at another's
/// slot: keys are partly chosen by clients (addresses).
///
/// Region layout (from `offset` in the file): magic (0..<8), seed (8..<16), evictions (16..<24),
/// mutex (64..<128); slots from 4,096: 16 bytes each, hash (0 = never used) then TAT.
final class SharedRateTable {
    static let slots = 16_384
    static let probes = 64
    static let headerSize = 4096
    static let size = headerSize + 16 * slots
    private static let magic: UInt64 = 0x636C_6F73_6574_5231  // "closetR1"

    private let region: UnsafeMutableRawPointer
    private var mutex: UnsafeMutablePointer<pthread_mutex_t> { (region + 64).assumingMemoryBound(to: pthread_mutex_t.self) }
    private var seed: UInt64 { region.load(fromByteOffset: 8, as: UInt64.self) }
    private var slotWords: UnsafeMutablePointer<UInt64> { (region + Self.headerSize).assumingMemoryBound(to: UInt64.self) }
    /// Live buckets forgotten to make room, ever, on this file (for tests and the curious).
    var evictions: UInt64 { csqlite_atomic_load((region + 16).assumingMemoryBound(to: UInt64.self)) }

    /// Maps the table at `offset` of the open file `fd`, setting it up when the file has none yet
    /// or the machine booted since (`freshBoot`: a mutex left locked by a process of the last boot
    /// would look held for ever; the buckets, wall-clock times, are kept). The caller holds the
    /// file's `flock`, so one process sets it up and the others find it ready. nil when the disk
    /// has no room for it or the mapping fails: the caller goes on without.
    static func map(fd: Int32, offset: Int, freshBoot: Bool) -> SharedRateTable? {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        if st.st_size >= offset + size {
            guard let table = mapped(fd: fd, offset: offset) else { return nil }
            if table.region.load(as: UInt64.self) == magic {
                if freshBoot, !table.initialiseMutex() { return nil }
                return table
            }
        }
        // No table yet (a page of an older release, or a new file): whatever lies past the page is
        // dropped and the region allocated afresh, which reads as zeros, so no slot needs writing.
        // Nobody maps this region: a table is only ever set up under the flock, and its magic is
        // written last.
        guard ftruncate(fd, off_t(offset)) == 0, posix_fallocate(fd, off_t(offset), off_t(size)) == 0,
            let table = mapped(fd: fd, offset: offset)
        else { return nil }
        var random: UInt64 = 0
        if getrandom(&random, 8, 0) != 8 { random = UInt64(UInt(bitPattern: time(nil))) ^ UInt64(getpid()) << 32 }
        table.region.storeBytes(of: random, toByteOffset: 8, as: UInt64.self)
        guard table.initialiseMutex() else { return nil }
        table.region.storeBytes(of: magic, as: UInt64.self)
        return table
    }

    private static func mapped(fd: Int32, offset: Int) -> SharedRateTable? {
        guard let p = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset)), p != MAP_FAILED else { return nil }
        return SharedRateTable(region: p)
    }

    private init(region: UnsafeMutableRawPointer) { self.region = region }

    deinit { munmap(region, Self.size) }

    private func initialiseMutex() -> Bool {
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_setpshared(&attr, Int32(PTHREAD_PROCESS_SHARED))
        pthread_mutexattr_setrobust(&attr, Int32(PTHREAD_MUTEX_ROBUST))
        let rc = pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
        return rc == 0
    }

    /// Reads the buckets of `keys` (nil: full) and stores what `change` makes of them (nil for a
    /// key: left as it is), all under the table's lock. false, with nothing read or changed, when
    /// the lock could not be had within a second (its holder stopped, not dead): the caller uses
    /// SQLite instead.
    func update(_ keys: [String], nowMs: Int64, _ change: ([Int64?]) -> [Int64?]) -> Bool {
        let hashes = keys.map(hash)
        var rc = pthread_mutex_trylock(mutex)
        if rc == EBUSY { rc = csqlite_mutex_lock_within(mutex, 1) }
        // A holder that died held it for a few stores into slots: at worst one bucket's TAT was
        // written without its hash, which leaves the slot as it was.
        if rc == EOWNERDEAD {
            pthread_mutex_consistent(mutex)
            rc = 0
        }
        guard rc == 0 else { return false }
        defer { pthread_mutex_unlock(mutex) }
        let found = hashes.map { find($0, nowMs: nowMs) }
        let stored = found.map { $0.map { Int64(bitPattern: slotWords[2 * $0 + 1]) } }
        let changed = change(stored.map { tat in tat.flatMap { $0 > nowMs ? $0 : nil } })
        for (i, tat) in changed.enumerated() {
            guard let tat, i < hashes.count else { continue }
            let slot = found[i] ?? place(hashes[i], nowMs: nowMs)
            slotWords[2 * slot + 1] = UInt64(bitPattern: tat)
            slotWords[2 * slot] = hashes[i]
        }
        return true
    }

    /// Tests only: takes the table's lock and keeps it (a process killed or stopped meanwhile).
    func holdLock() -> Bool { pthread_mutex_lock(mutex) == 0 }
    /// Tests only: lets go of a lock `holdLock` took.
    func releaseLock() { pthread_mutex_unlock(mutex) }

    /// Slots holding a bucket, live or full (tests).
    var usedSlots: Int { (0..<Self.slots).reduce(0) { $0 + (slotWords[2 * $1] == 0 ? 0 : 1) } }

    /// The slot holding `hash`, nil when none does.
    private func find(_ hash: UInt64, nowMs: Int64) -> Int? {
        let mask = Self.slots - 1
        for step in 0..<Self.probes {
            let slot = (Self.home(hash) &+ step) & mask
            let owner = slotWords[2 * slot]
            if owner == hash { return slot }
            if owner == 0 { return nil }  // slots are taken in probe order and never emptied
        }
        return nil
    }

    /// A slot for `hash`, which holds none: the first never used, else the first whose bucket is
    /// full (its TAT not after now), else the one nearest to full, whose bucket is forgotten.
    private func place(_ hash: UInt64, nowMs: Int64) -> Int {
        let mask = Self.slots - 1
        var nearest = Self.home(hash) & mask, nearestTAT = Int64.max
        for step in 0..<Self.probes {
            let slot = (Self.home(hash) &+ step) & mask
            let tat = Int64(bitPattern: slotWords[2 * slot + 1])
            if slotWords[2 * slot] == 0 || tat <= nowMs { return slot }
            if tat < nearestTAT { (nearest, nearestTAT) = (slot, tat) }
        }
        csqlite_atomic_increment((region + 16).assumingMemoryBound(to: UInt64.self))
        return nearest
    }

    /// Where probing for `hash` starts: its high bits folded in, as FNV's low bits mix least.
    private static func home(_ hash: UInt64) -> Int { Int(truncatingIfNeeded: hash ^ hash >> 29) }

    /// FNV-1a of the key, begun from the file's seed; never 0, which marks a slot never used.
    private func hash(_ key: String) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325 ^ seed
        for byte in key.utf8 { h = (h ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return h == 0 ? 1 : h
    }
}
