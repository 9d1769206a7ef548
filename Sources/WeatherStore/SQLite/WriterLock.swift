import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// A queue for SQLite's single writer, shared by every worker on the machine: a process-shared,
/// robust pthread mutex in the first page of a file beside the database (`<db>-writer`).
///
/// SQLite's own write lock cannot be waited for: a second writer gets SQLITE_BUSY and its busy
/// handler polls (yields, then naps). Under a burst of writes (session creation, refresh) the
/// two workers of this machine spent half their CPU polling, and a nap often outlasted the
/// transaction it waited for. Taking this mutex first makes the kernel queue the writers and wake
/// the next one the moment the lock is free. It is only an optimisation: SQLite's lock still
/// decides, so a process that does not use it (weatherctl, the sqlite3 shell) is merely polled
/// for as before. A worker killed while holding it leaves it "owner dead"; the next one takes it
/// over (robust mutex). The file records the boot it was set up in: after a reboot (when a mutex
/// left locked would otherwise look held forever) it is set up afresh. Waiting gives up after
/// `timeout` seconds and the transaction goes on to SQLite's busy handler, so a stuck holder
/// costs a 503, never a hang.
///
/// The same page carries the revocation generation: a counter every revocation moves on (at its
/// commit, before the queue is let go; a holder that died is taken to have revoked), so that a
/// worker may keep access grants it looked up for as long as the counter has not moved
/// (`SQLiteGatewayStore.accessGrant`). It also carries the checkpoint mark: the
/// WAL's length at the last checkpoint any worker made (`Database.checkpointIfDue`), and the
/// provider pauses (`SharedProviderPauses`), and the damage mark: the database file a worker
/// found damaged. Page layout: magic (0..<8), boot id (8..<48), checkpoint mark (48..<56),
/// revocation generation (56..<64), mutex (64..<128), provider pause slots (128..<256: eight of
/// a name tag and a pause, 8 bytes each), damage mark (256..<264). Pages made before the mark,
/// the slots or the damage mark existed have zeros there, which reads as "never", "no pause"
/// and "none". The rate buckets of every worker follow the page in the same file
/// (`SharedRateTable`, from offset 4,096).
final class WriterLock {
    private let page: UnsafeMutableRawPointer
    private var mutex: UnsafeMutablePointer<pthread_mutex_t> { (page + 64).assumingMemoryBound(to: pthread_mutex_t.self) }
    private var generation: UnsafeMutablePointer<UInt64> { (page + 56).assumingMemoryBound(to: UInt64.self) }

    /// Moves whenever any process revokes a session or token.
    var revocationGeneration: UInt64 { csqlite_atomic_load(generation) }
    func noteRevocation() { csqlite_atomic_increment(generation) }

    /// The WAL's length in frames at the last checkpoint any worker made or claimed.
    private var mark: UnsafeMutablePointer<UInt64> { (page + 48).assumingMemoryBound(to: UInt64.self) }
    var checkpointMark: UInt64 { csqlite_atomic_load(mark) }
    /// Moves the mark from `seen` to `frames`; false when another worker moved it first (its
    /// checkpoint covers this stretch of the WAL).
    func claimCheckpoint(seen: UInt64, frames: UInt64) -> Bool { csqlite_atomic_replace(mark, seen, frames) }
    func recordCheckpoint(frames: UInt64) { csqlite_atomic_store(mark, frames) }
    /// The pause word of the provider whose name hashes to `tag` (nonzero); with `claim`, a
    /// free slot becomes its own the first time. nil when it has none (and all eight belong to
    /// other providers, when claiming).
    func pauseSlot(tag: UInt64, claim: Bool) -> UnsafeMutablePointer<UInt64>? {
        for i in 0..<Self.pauseSlots {
            let slot = (page + Self.pauseOffset + 16 * i).assumingMemoryBound(to: UInt64.self)
            let owner = csqlite_atomic_load(slot)
            if owner == tag { return slot + 1 }
            if owner == 0 {
                // Slots are claimed in order, so the first free one ends the search.
                guard claim else { return nil }
                if csqlite_atomic_replace(slot, 0, tag) || csqlite_atomic_load(slot) == tag { return slot + 1 }
            }
        }
        return nil
    }
    private static let pauseOffset = 128, pauseSlots = 8

    /// The inode of the database file some worker found damaged, plus one; 0 when none was. A
    /// file put in its place has another inode, and a restore removes the page altogether.
    private var damage: UnsafeMutablePointer<UInt64> { (page + 256).assumingMemoryBound(to: UInt64.self) }
    /// The inode of the database file some worker found damaged; nil when none was.
    var damagedInode: UInt64? {
        let mark = csqlite_atomic_load(damage)
        return mark == 0 ? nil : mark - 1
    }
    func noteDamage(inode: UInt64) { csqlite_atomic_store(damage, inode &+ 1) }
    func clearDamage() { csqlite_atomic_store(damage, 0) }

    /// The machine's rate buckets, mapped from the file after this page (`SharedRateTable`);
    /// nil when the disk had no room for them, or another reason (`ratesUnavailable`).
    private(set) var rates: SharedRateTable?
    /// Why `rates` is nil.
    private(set) var ratesUnavailable: SharedRateTable.Unavailable?

    private static let size = 4096
    private static let magic: UInt64 = 0x636C_6F73_6574_5731  // "closetW1"
    let timeout: Int
    /// The file's path and identity, for `retryRates` (it must map the table of this very file).
    private let path: String
    private var identity: (dev: UInt64, ino: UInt64) = (0, 0)

    /// The lock of the database at `databasePath`, or nil when there is none to be had (a
    /// read-only directory, say): the database works without it.
    /// Created with the database file's permissions, as SQLite creates `-wal` and `-shm`, so that
    /// whoever may write the database may also use its queue.
    /// Created with the database file's owner too when this process is root (as SQLite does for
    /// `-wal` and `-shm`): `weatherctl revoke` run as root must not leave a page the service's
    /// user cannot open.
    /// Without `create`, only a page that exists is opened.
    /// Its owner may always read and write it, whatever the database's mode: a database made
    /// read-only for a moment (`chmod 0444`) gave the page that mode at the next opening, and from
    /// then on no worker or `weatherctl` could open it to write (an incident drill: revocations no
    /// longer reached the workers that held it, and nothing said so).
    convenience init?(databasePath: String, timeout: Int = 5, create: Bool = true) {
        var st = stat()
        let found = stat(databasePath, &st) == 0
        self.init(
            path: databasePath + "-writer", timeout: timeout, mode: found ? st.st_mode & 0o666 | 0o600 : 0o600,
            owner: found && geteuid() == 0 ? (st.st_uid, st.st_gid) : nil, create: create)
    }

    /// Opens or creates the lock file at `path`; nil when it cannot. Only a regular file with one
    /// name, reached without a symbolic link: the folder belongs to the service's user, and root
    /// (running `weatherctl`) must not be led to change the mode or owner of, or write into,
    /// another file through a link planted there.
    init?(path: String, timeout: Int = 5, mode: mode_t = 0o600, owner: (uid_t, gid_t)? = nil, create: Bool = true) {
        self.timeout = timeout
        self.path = path
        // A page of its own that its owner may not write (an older release gave it a 0444
        // database's mode): opened to read, it can still be given its mode (only root got past
        // the read-write open before; a review).
        if access(path, W_OK) != 0, errno == EACCES {
            let readOnly = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)  // a FIFO must not block
            var st = stat()
            if readOnly >= 0, fstat(readOnly, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_nlink == 1, st.st_uid == geteuid() {
                fchmod(readOnly, mode)
            }
            if readOnly >= 0 { close(readOnly) }
        }
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), mode)
        guard fd >= 0 else { return nil }
        var file = stat()
        guard fstat(fd, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1 else {
            close(fd)
            return nil
        }
        identity = (UInt64(file.st_dev), UInt64(file.st_ino))
        fchmod(fd, mode)  // the umask may have taken bits away
        if let owner { _ = fchown(fd, owner.0, owner.1) }
        defer { close(fd) }  // the mapping stays valid after close
        // Only one process sets the mutex up: the others wait on flock, then find it ready.
        guard flock(fd, LOCK_EX) == 0 else { return nil }
        defer { flock(fd, LOCK_UN) }
        var st = stat()
        // Blocks, not only a size: on a full disk `ftruncate` makes a sparse page, and the first
        // store to its mapping then kills the process with SIGBUS. `posix_fallocate` refuses
        // instead (ENOSPC), and the database goes on without the page. (A page set up before
        // is allocated already; this allocates nothing then. On a copy-on-write file system a
        // rewrite needs new blocks anyway, which no allocation up front can promise.)
        guard MemoryLayout<pthread_mutex_t>.size <= Self.pauseOffset - 64, fstat(fd, &st) == 0,
            posix_fallocate(fd, 0, off_t(Self.size)) == 0
        else { return nil }
        guard let p = mmap(nil, Self.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), p != MAP_FAILED else { return nil }
        page = p
        let boot = Self.bootId()
        let recorded = UnsafeRawBufferPointer(start: page + 8, count: 40)
        // A page set up by a process that could not read the boot id (a sandbox without
        // `/proc/sys`) records none, and is set up afresh by the first process that can, as one
        // of another boot: it may be one (a mutex left locked by a crash would then be held for
        // ever), and nothing on the page tells. Under workers holding it, that lets two hold it
        // once, and SQLite's own lock still keeps their writes apart (session 23 kept such a
        // mutex for one commit; a review found it then held for ever after a crash).
        if page.load(as: UInt64.self) != Self.magic || !recorded.starts(with: boot) {
            // Pauses until times of the last boot's clock are forgotten with its mutex.
            UnsafeMutableRawBufferPointer(start: page + Self.pauseOffset, count: 16 * Self.pauseSlots).initializeMemory(as: UInt8.self, repeating: 0)
            guard Self.initialiseSharedMutex(mutex) else { return nil }  // deinit unmaps the page
            UnsafeMutableRawBufferPointer(start: page + 8, count: 40).copyBytes(from: boot + [UInt8](repeating: 0, count: 40 - boot.count))
            page.storeBytes(of: Self.magic, as: UInt64.self)
        }
        switch SharedRateTable.map(fd: fd, offset: Self.size, boot: boot) {
        case .success(let table): rates = table
        case .failure(let why): ratesUnavailable = why
        }
    }

    /// Maps the rate table after an opening that had no room for it (a full disk): true when this
    /// call mapped it. Only the same file (a page restored or made anew since is another: this
    /// connection's page would not be its page), under the file's `flock` as at the opening.
    func retryRates() -> Bool {
        guard rates == nil, ratesUnavailable == .noRoom || ratesUnavailable == .notExtended else { return false }
        let fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var file = stat()
        guard fstat(fd, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1, (UInt64(file.st_dev), UInt64(file.st_ino)) == identity,
            flock(fd, LOCK_EX) == 0
        else { return false }
        defer { flock(fd, LOCK_UN) }
        switch SharedRateTable.map(fd: fd, offset: Self.size, boot: Self.bootId()) {
        case .success(let table):
            rates = table
            ratesUnavailable = nil
            return true
        case .failure(let why):
            ratesUnavailable = why
            return false
        }
    }

    /// Sets up `mutex`, in memory shared between processes, as process-shared and robust (a
    /// holder that dies leaves it "owner dead" for the next); false when it could not be.
    static func initialiseSharedMutex(_ mutex: UnsafeMutablePointer<pthread_mutex_t>) -> Bool {
        var attr = pthread_mutexattr_t()
        pthread_mutexattr_init(&attr)
        pthread_mutexattr_setpshared(&attr, Int32(PTHREAD_PROCESS_SHARED))
        pthread_mutexattr_setrobust(&attr, Int32(PTHREAD_MUTEX_ROBUST))
        let rc = pthread_mutex_init(mutex, &attr)
        pthread_mutexattr_destroy(&attr)
        return rc == 0
    }

    /// This boot's id (36 bytes from the kernel), or nothing where there is none.
    private static func bootId() -> [UInt8] {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var buf = [UInt8](repeating: 0, count: 36)
        let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, 36) }
        return n == 36 ? buf : []
    }

    deinit { munmap(page, Self.size) }

    /// Waits for the writer's turn, at most `timeout` seconds by the monotonic clock (only tries,
    /// without `waiting`); false when it did not get it (go on without it). The page is shared
    /// by a worker's request thread and its checkpointer's: whatever a caller remembers between
    /// calls (`Database.writerSeemsStuck`) it keeps itself.
    func lock(waiting: Bool = true) -> Bool {
        var rc = pthread_mutex_trylock(mutex)
        if rc == EBUSY && waiting { rc = csqlite_mutex_lock_within(mutex, Int32(clamping: timeout)) }
        if rc == EOWNERDEAD {
            // The previous holder died mid-transaction; SQLite rolls its transaction back itself.
            // Or it died just after its COMMIT, before announcing a revocation that commit made
            // (`Database.transaction`): announced here for it, as nothing else would (its client's
            // repeated revoke finds the session revoked already and announces nothing). Other
            // workers' grants are only looked up again.
            pthread_mutex_consistent(mutex)
            noteRevocation()
            rc = 0
        }
        return rc == 0
    }

    func unlock() { pthread_mutex_unlock(mutex) }
}
