import CSQLite
#if canImport(Glibc)
import Glibc
#endif
import WeatherCore

/// One SQLite connection, owned by one worker process, with its prepared statements cached.
public final class Database {
    let handle: OpaquePointer
    private var statements: [String: Statement] = [:]

    /// Opens (creating if needed) the database at `path` and sets the pragmas every worker relies on:
    /// WAL (verified), `synchronous=NORMAL`, a busy timeout, foreign keys. `walWrites`: how its
    /// commits reach the WAL (see `WALWrites`).
    ///
    /// Read-only, a WAL-mode file with neither `-wal` nor `-shm` beside it (a copy, on a backup
    /// disk or in a folder this user may not write) is opened `immutable`: SQLite would otherwise
    /// need to create the `-shm` index and refuse. Without those two files no connection has the
    /// database open and nothing waits in a WAL, so the file alone is all of it, as long as no
    /// worker opens it meanwhile: `changedWhileReadImmutable` tells.
    ///
    /// `gatewayFile`: the file is to be the gateway's; one holding another program's tables is
    /// refused before anything in it changes (`Migrator.refuseAnotherProgramsFile`).
    /// `create: false`: a file that is not there is an error (CANTOPEN), not a new empty database.
    public init(
        path: String, readOnly: Bool = false, walWrites: WALWrites = .perFrame, gatewayFile: Bool = false, create: Bool = true
    ) throws(DatabaseError) {
        let flags =
            (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0)) | SQLITE_OPEN_NOMUTEX
        let vfs = walWrites == .perCommit && !readOnly && csqlite_wal_register() == SQLITE_OK ? csqlite_wal_vfs_name() : nil
        var db = try Self.open(path, flags: flags, vfs: vfs)
        var snapshot: FileSnapshot?
        if readOnly, let refused = Self.readRefusal(db) {
            // SQLite's name of the file, a symbolic link resolved: its -wal and -shm are named after it.
            let file = sqlite3_db_filename(db, "main").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? path
            sqlite3_close_v2(db)
            guard !Self.exists(file + "-wal"), !Self.exists(file + "-shm"), let before = FileSnapshot(file) else {
                throw DatabaseError(
                    resultCode: refused.resultCode,
                    message:
                        "\(refused.message): reading a WAL database needs a -shm file beside it that this user may write; run as the service user, or copy the database with its -wal to a folder this user may write",
                    sql: nil)
            }
            db = try Self.open(Self.immutableURI(file), flags: flags | SQLITE_OPEN_URI, vfs: nil)
            snapshot = before
        }
        handle = db
        immutableSnapshot = snapshot
        Database.installBusyHandler(db)
        if !readOnly {
            // Before anything is changed: not another program's file.
            if gatewayFile { try Migrator.refuseAnotherProgramsFile(self) }
            // Several workers may open a new file at once; switching to WAL needs a moment alone.
            // SQLite answers SQLITE_BUSY to the switch at once, without its busy handler, when
            // another connection is switching or migrating the new file right then (a first
            // start racing `weatherctl migrate`: 8 of 40 tries failed one or the other), so the
            // switch is asked again for up to 2 s.
            var attempts = 0
            var mode: String?
            while true {
                do {
                    mode = try scalarText("PRAGMA journal_mode=WAL")
                    break
                } catch  where error.resultCode & 0xff == SQLITE_BUSY && attempts < 200 {
                    attempts += 1
                    usleep(10_000)
                }
            }
            guard mode?.lowercased() == "wal" else {
                throw DatabaseError(resultCode: SQLITE_ERROR, message: "journal_mode is \(mode ?? "unknown"), not wal", sql: nil)
            }
        }
        try execute("PRAGMA synchronous=NORMAL")
        try execute("PRAGMA foreign_keys=ON")
        // Frames spilled in the middle of a transaction would wait in the buffer for a commit
        // that a rollback never brings (shim.h); the largest worker transaction is a few dozen pages.
        if vfs != nil { try execute("PRAGMA cache_spill=OFF") }
        fileIdentity = Self.identity(of: path)
        fileName = sqlite3_db_filename(db, "main").flatMap { $0.pointee == 0 ? nil : String(cString: $0) }
    }

    private static func open(_ name: String, flags: Int32, vfs: UnsafePointer<CChar>?) throws(DatabaseError) -> OpaquePointer {
        var db: OpaquePointer?
        let rc = sqlite3_open_v2(name, &db, flags, vfs)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open database"
            sqlite3_close_v2(db)
            throw DatabaseError(resultCode: rc, message: message, sql: nil)
        }
        sqlite3_extended_result_codes(db, 1)
        return db
    }

    /// The error of a first read that SQLite refuses for want of a `-shm` it may not create
    /// (`SQLITE_READONLY_DIRECTORY`, or `SQLITE_CANTOPEN`); nil when the read works or fails otherwise.
    private static func readRefusal(_ db: OpaquePointer) -> DatabaseError? {
        let readOnlyDirectory = SQLITE_READONLY | (6 << 8)  // SQLITE_READONLY_DIRECTORY, a macro Swift does not import
        let rc = sqlite3_exec(db, "PRAGMA schema_version", nil, nil, nil)
        guard rc == readOnlyDirectory || rc & 0xff == SQLITE_CANTOPEN else { return nil }
        return DatabaseError(resultCode: rc, message: String(cString: sqlite3_errmsg(db)), sql: nil)
    }

    /// `file:` URI of `path` with `immutable=1`: `%`, `?` and `#` escaped; an absolute path after an
    /// empty authority (`file://` + `/…`), so one beginning with `//` is not read as a host.
    static func immutableURI(_ path: String) -> String {
        var escaped = ""
        for c in path.unicodeScalars {
            switch c {
            case "%": escaped += "%25"
            case "?": escaped += "%3f"
            case "#": escaped += "%23"
            default: escaped.unicodeScalars.append(c)
            }
        }
        return (path.hasPrefix("/") ? "file://" : "file:") + escaped + "?immutable=1"
    }

    private static func exists(_ path: String) -> Bool {
        var st = stat()
        return lstat(path, &st) == 0
    }

    /// The file as it was when opened `immutable`; nil otherwise.
    private var immutableSnapshot: FileSnapshot?

    /// Whether the connection reads its file `immutable` (a copy this user may not write beside).
    public var isImmutableCopy: Bool { immutableSnapshot != nil }

    /// True when the connection reads its file `immutable` and, since it was opened, the file
    /// changed or a `-wal` or `-shm` appeared beside it: a worker opened it meanwhile (the service
    /// started), and what was read may be wrong. Never true for any other connection.
    public var changedWhileReadImmutable: Bool { immutableSnapshot.map(Self.changed(since:)) ?? false }

    /// Whether the file of `snapshot` is no longer as it was, or a `-wal` or `-shm` lies beside it.
    static func changed(since snapshot: FileSnapshot) -> Bool {
        FileSnapshot(snapshot.path) != snapshot || exists(snapshot.path + "-wal") || exists(snapshot.path + "-shm")
    }

    /// For a connection opened `immutable`, the journal mode its file's header records: `wal` when
    /// the format bytes 18 and 19 are 2, else `delete`. SQLite never opens the WAL of an immutable
    /// file, so `PRAGMA journal_mode` there answers `delete` whatever the workers use. Nil for
    /// any other connection.
    public var immutableFileJournalMode: String? {
        guard let path = immutableSnapshot?.path else { return nil }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        var versions: (UInt8, UInt8) = (0, 0)
        let read = withUnsafeMutableBytes(of: &versions) { pread(fd, $0.baseAddress, 2, 18) }
        return read == 2 && versions == (2, 2) ? "wal" : "delete"
    }

    /// Which file, how long, last changed when.
    struct FileSnapshot: Equatable {
        let path: String
        let device: UInt64, inode: UInt64, size: Int64, modified: Int64, modifiedNanoseconds: Int64

        init?(_ path: String) {
            var st = stat()
            guard stat(path, &st) == 0 else { return nil }
            self.path = path
            (device, inode, size) = (UInt64(st.st_dev), UInt64(st.st_ino), Int64(st.st_size))
            (modified, modifiedNanoseconds) = (Int64(st.st_mtim.tv_sec), Int64(st.st_mtim.tv_nsec))
        }
    }

    /// Device and inode of the database file when it was opened.
    private var fileIdentity: (dev: UInt64, ino: UInt64)?
    /// SQLite's name of the file (a symbolic link resolved), kept so that `isStillAtItsPath`
    /// needs no SQLite, the connection closed or not.
    private var fileName: String?

    private static func identity(of path: String) -> (dev: UInt64, ino: UInt64)? {
        FileSnapshot(path).map { ($0.device, $0.inode) }
    }

    /// Whether the file at the database's path is still the one this connection has open. It is
    /// not when someone moved or deleted the database under a running worker: a worker started
    /// afterwards would create a new, empty database there, and the two would split the service
    /// (tokens valid on one and not the other). `/v1/health` reports that.
    public var isStillAtItsPath: Bool {
        guard let opened = fileIdentity, let fileName, let now = Self.identity(of: fileName) else { return fileIdentity == nil }
        return now == opened
    }

    /// How a connection's commits reach the WAL.
    public enum WALWrites: Sendable {
        /// SQLite's own way: two `pwrite` calls per frame (its header, its page).
        case perFrame
        /// One `pwrite` per commit, through a VFS that gathers a commit's frames and writes them
        /// when the commit frame arrives, before SQLite publishes the commit (CSQLite's shim.h).
        /// A session creation's commit is about ten frames: 21 system calls became one, all of
        /// them made while every other writer waits (bench/RESULTS.md).
        case perCommit

    }

    /// The writes this connection made to its WAL through the `perCommit` VFS; nil when its WAL
    /// is not open through it (tests).
    var walWritesMade: Int? {
        guard !isClosed else { return nil }
        let n = csqlite_wal_write_count(handle)
        return n >= 0 ? n : nil
    }

    /// Waiting for another worker's write lock. SQLite's default busy handler sleeps in steps of
    /// milliseconds, which is longer than a whole request here and made every contended write
    /// cost a sleep. Transactions last microseconds, so yield first, then nap 100 µs at a time,
    /// and give up (SQLITE_BUSY → 503) after `naps` of them: 40,000 is five seconds asleep, but
    /// 6–8 s by the clock, as the kernel's timer slack makes each nap 150–190 µs here (a
    /// failure-path audit; measured with a loaded machine). With the writers' queue's own 5 s
    /// before it, a write gives up within the web server's 15 s.
    static func installBusyHandler(_ db: OpaquePointer, naps: Int = 40_000) {
        sqlite3_busy_handler(
            db,
            { context, attempts in
                if attempts < 200 {
                    sched_yield()
                    return 1
                }
                if Int(attempts) < 200 + Int(bitPattern: context) {
                    usleep(100)
                    return 1
                }
                return 0
            }, UnsafeMutableRawPointer(bitPattern: naps))
    }

    /// After `close`, the members a store reaches answer without SQLite: statements and
    /// transactions throw `closedError` (a transaction before queueing for the writers' lock), the
    /// checkpoints do nothing, and the questions get their safe answer (`isReadOnly`: true). A store whose reopening
    /// failed (a disk giving I/O errors, no descriptors left) keeps its closed connection until the
    /// next reopening works, and its housekeeping (the flush's check of the file, a stop's WAL
    /// truncation, a due checkpoint) asked SQLite about a freed handle (a failure-path audit).
    private(set) var isClosed = false

    /// What a closed connection's statements throw: CANTOPEN, which makes a store try to reopen.
    static let closedError = DatabaseError(resultCode: SQLITE_CANTOPEN, message: "the database connection is closed", sql: nil)

    /// Closes the connection now (before a replacement is opened: SQLite shares one `-shm` index per
    /// file inside a process, so a new connection beside an old read-only one would be read-only too).
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        checkpointer?.stop()
        checkpointer = nil
        sqlite3_wal_hook(handle, nil, nil)
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    deinit { close() }

    /// True when SQLite opened the file read-only because the file system refused writing, or
    /// when the connection is closed.
    public var isReadOnly: Bool { isClosed || sqlite3_db_readonly(handle, "main") == 1 }

    /// Runs SQL without results (may hold several statements); not cached.
    public func execute(_ sql: String) throws(DatabaseError) {
        guard !isClosed else { throw Self.closedError }
        var err: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &err)
        if rc != SQLITE_OK {
            let message = err.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(err)
            throw DatabaseError(resultCode: rc, message: message, sql: sql)
        }
    }

    /// The cached prepared statement for `sql`, reset and with bindings cleared.
    public func statement(_ sql: String) throws(DatabaseError) -> Statement {
        guard !isClosed else { throw Self.closedError }
        if let s = statements[sql] {
            s.reset()
            return s
        }
        let s = try Statement(database: self, sql: sql)
        statements[sql] = s
        return s
    }

    /// First column of the first row as text.
    public func scalarText(_ sql: String, _ bindings: [SQLValue] = []) throws(DatabaseError) -> String? {
        let s = try statement(sql)
        try s.bind(bindings)
        defer { s.reset() }
        return try s.step() ? s.text(0) : nil
    }

    /// First column of the first row as an integer.
    public func scalarInt(_ sql: String, _ bindings: [SQLValue] = []) throws(DatabaseError) -> Int64? {
        let s = try statement(sql)
        try s.bind(bindings)
        defer { s.reset() }
        return try s.step() ? (s.isNull(0) ? nil : s.int(0)) : nil
    }

    /// Runs one cached statement to completion and returns the number of rows it changed.
    @discardableResult
    public func run(_ sql: String, _ bindings: [SQLValue] = []) throws(DatabaseError) -> Int {
        let s = try statement(sql)
        try s.bind(bindings)
        defer { s.reset() }
        while try s.step() {}
        return Int(sqlite3_changes(handle))
    }

    /// Runs `body` in a `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so two
    /// workers never both read then both write. Rolls back when `body` throws.
    /// With a `WriterLock`, waits for it first (see there), and holds it until the end. A
    /// revocation `body` noted (`noteRevocation`) is announced after the COMMIT and before the
    /// queue is let go, so a writer killed between the two leaves it to the queue's next holder
    /// (`WriterLock.lock`, owner dead), not unannounced.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        guard !isClosed else { throw Self.closedError }
        let asked = MonotonicTime.now()
        let queued = writerLock?.lock(waiting: !writerSeemsStuck) ?? false
        writerSeemsStuck = writerLock != nil && !queued
        defer { if queued { writerLock?.unlock() } }
        do {
            try runControl("BEGIN IMMEDIATE")
        } catch {
            writeWaitNs &+= MonotonicTime.now() &- asked
            throw error
        }
        writeWaitNs &+= MonotonicTime.now() &- asked
        inTransaction = true
        revocationInTransaction = false
        defer { inTransaction = false }
        do {
            let value = try body()
            try runControl("COMMIT")
            if revocationInTransaction { announceRevocation() }
            return value
        } catch {
            try? runControl("ROLLBACK")  // the original error is the one worth reporting
            throw error
        }
    }

    /// Inside `transaction`: whether its body noted a revocation, to be announced at its commit.
    private var inTransaction = false, revocationInTransaction = false

    /// BEGIN, COMMIT and ROLLBACK as cached statements (`execute` would parse them every time).
    private func runControl(_ sql: String) throws(DatabaseError) {
        let s = try statement(sql)
        defer { s.reset() }
        while try s.step() {}
    }

    // MARK: Writer queue and checkpoints

    /// Nanoseconds `transaction` spent waiting for the write lock (the writers' queue, then
    /// `BEGIN IMMEDIATE` with SQLite's busy handler), added up until `takeWriteWait` reads them.
    private var writeWaitNs: UInt64 = 0

    /// The wait for the write lock since the last call, in nanoseconds; starts counting again.
    public func takeWriteWait() -> UInt64 {
        defer { writeWaitNs = 0 }
        return writeWaitNs
    }

    /// Set by `attachWriterPage`.
    private var writerLock: WriterLock?
    /// This connection's last wait for the writers' queue timed out, and it has not had its turn
    /// since: until it has, it only tries. A holder that is stopped rather than dead (SIGSTOP, a
    /// debugger) would otherwise cost every write of every request the whole wait, where
    /// SQLite's own lock, which such a holder may not even hold, decides anyway.
    private var writerSeemsStuck = false
    /// Pages in the WAL after this connection's last commit (from the WAL hook).
    fileprivate(set) var walPages: Int32 = 0
    /// Set by the WAL hook, cleared by `checkpointIfDue`.
    fileprivate var committedSinceCheck = false
    /// A worker connection's page cache in KiB (see `queueWritersAndDeferCheckpoints`).
    public static let workerCacheKiB = 512
    /// How far the WAL grows before `checkpointIfDue` copies it back: 4,000 frames (16 MiB), four
    /// times SQLite's default autocheckpoint. Against 1,000, in the same A/B rounds of creation
    /// and refresh (bench/RESULTS.md, 13:58): p99 43–53 → 28–33 ms and 35–45 → 25–28 ms,
    /// throughput ×1.04–1.12 and ×0.97–1.13 (pages written again within a stretch are copied
    /// once, and there are fewer WAL syncs). 8,000 was worse on p99 (42–48 ms against 29–39).
    /// Tests set it lower.
    public var checkpointPages: Int32 = 4_000

    /// For a worker: writers wait in a kernel queue instead of polling (`WriterLock`), and the
    /// WAL is checkpointed by `checkpointIfDue` after a response rather than inside the commit
    /// of whichever request crossed the threshold (while that request, and every other writer,
    /// waited for it).
    public func queueWritersAndDeferCheckpoints() {
        attachWriterPage()
        if checkpointer == nil, !isReadOnly, let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 {
            checkpointerPath = String(cString: name)
        }
        // A worker's page cache: 512 KiB instead of SQLite's 2 MiB. The hot reads (grants, fresh
        // cache rows) no longer reach SQLite, writes touch random index pages that no cache of
        // this size would keep, and the kernel's page cache is shared by every worker anyway.
        applyCheckpointingPragmas(cacheKiB: Self.workerCacheKiB)
        sqlite3_wal_hook(
            handle,
            { context, _, _, pages in
                guard let context else { return SQLITE_OK }
                let db = Unmanaged<Database>.fromOpaque(context).takeUnretainedValue()
                db.walPages = pages
                db.committedSinceCheck = true
                return SQLITE_OK
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    /// Opens the database's `-writer` page (`WriterLock`) if it is not open yet: its writers'
    /// queue, waited for at most `waitSeconds`, and its revocation generation. Without one
    /// (read-only directory) both are skipped. Without `create`, only a page that exists.
    /// A holder of the queue that died is taken over at once (only tried, never waited for): a
    /// revocation it committed just before it was killed is announced as the worker replacing it
    /// starts (`WriterLock.lock`), not only at the machine's next write.
    public func attachWriterPage(waitSeconds: Int = 5, create: Bool = true) {
        guard writerLock == nil, !isClosed, let name = sqlite3_db_filename(handle, "main"), name.pointee != 0 else { return }
        writerLock = WriterLock(databasePath: String(cString: name), timeout: waitSeconds, create: create)
        if let lock = writerLock, lock.lock(waiting: false) { lock.unlock() }
    }

    /// The revocation generation of the `-writer` page; nil without one.
    public var revocationGeneration: UInt64? { writerLock?.revocationGeneration }

    /// Tells every process of the machine that a revocation was committed, so that they drop the
    /// access grants they keep (`SQLiteGatewayStore.accessGrant`). Inside `transaction`, at its
    /// commit (a revocation rolled back is none); outside, at once.
    public func noteRevocation() {
        if inTransaction { revocationInTransaction = true } else { announceRevocation() }
    }

    /// Moves the page's revocation generation. A connection that could not open the page before
    /// (a full disk at start, no file descriptor left) tries again first: without it, its
    /// revocations would reach no other worker's grants, and nothing would say so (a review of
    /// the state workers share).
    private func announceRevocation() {
        if writerLock == nil { attachWriterPage(create: false) }
        writerLock?.noteRevocation()
    }

    /// Tells every worker of the machine that the file this connection has open is damaged
    /// (`-writer` page), so that each answers health 503, not only the one that met the damage.
    public func noteDamage() {
        if let opened = fileIdentity { writerLock?.noteDamage(inode: opened.ino) }
    }

    /// Clears the damage mark (`noteDamage`); true when there was one. For a file found sound,
    /// or made anew: an inode number is reused at once on ext4, and a repair in place keeps it.
    public func clearDamageMark() -> Bool {
        guard let lock = writerLock, lock.damagedInode != nil else { return false }
        lock.clearDamage()
        return true
    }

    /// Whether some worker found the file this connection has open damaged (`noteDamage`).
    public var damageNoted: Bool {
        guard let marked = writerLock?.damagedInode, let opened = fileIdentity else { return false }
        return marked == opened.ino
    }

    /// The rate buckets every worker of the machine shares (`SharedRateTable`); nil without the
    /// `-writer` file, or room on the disk for them.
    var rateTable: SharedRateTable? { writerLock?.rates }

    /// Whether this connection has the `-writer` page open.
    var hasWriterPage: Bool { writerLock != nil }

    /// Maps the rate table now if the page's opening had no room for it (`WriterLock.retryRates`);
    /// true when this call gained it.
    func regainRateTable() -> Bool { writerLock?.retryRates() ?? false }

    /// Why this connection has no `rateTable`; nil when it has one.
    var rateTableUnavailable: String? {
        guard rateTable == nil else { return nil }
        guard let writerLock else {
            return
                "the -writer file beside the database could not be opened or made (a folder or file this user may not write, a read-only file system, a full disk, or a file that is not a plain one)"
        }
        return writerLock.ratesUnavailable?.reason ?? "the table could not be had"
    }

    /// The provider pauses of the `-writer` page, shared by every worker; nil without one.
    public var providerPauses: (any ProviderPauseBoard)? { writerLock.map(SharedProviderPauses.init(page:)) }

    /// A passive checkpoint once commits have grown the WAL `checkpointPages` past the last
    /// checkpoint. Passive: it never waits for readers or writers; what it cannot copy now is
    /// copied next time. This decides and claims; the `checkpointer`'s thread does the work (see
    /// `checkpoint`), or this connection when there is none.
    ///
    /// One worker checkpoints each stretch of the WAL. The last checkpoint's WAL length (the
    /// mark) is kept in the `-writer` page, shared by every worker; a worker due to checkpoint
    /// claims the stretch by moving the mark (compare and swap) and the others leave it to it.
    /// With a mark per connection, each of two workers copied every stretch back on its own, and
    /// whichever came second found the checkpoint lock taken (SQLITE_BUSY), which reset its count
    /// so that it tried again after every request: 1,126 checkpoints (35 of them RESTARTs) and
    /// 931 failed attempts in 10 s of session creation, where 577 were due. Without a `-writer`
    /// page (a read-only directory) the mark is the connection's own. Counted from the mark, not from zero: the WAL
    /// may not restart for a while, and counting from zero would checkpoint after every request
    /// once it had grown past the threshold. Only after this connection committed: its WAL length
    /// (from the WAL hook) is current then.
    ///
    /// A passive checkpoint copies the WAL back but cannot start it over: only a writer can, and
    /// only when no other connection is reading from the WAL at that moment. Under steady load
    /// another worker nearly always is, so the WAL never restarted and grew by every commit
    /// (2.4 GB after 30,000 creations and 6 s of refreshes; 7.8 GB in one benchmark). Once it
    /// holds `walLimitPages` frames, a RESTART checkpoint waits up to about 20 ms for the readers
    /// of the moment, whose transactions are short, so that the next writer starts the WAL over
    /// (and `journal_size_limit` cuts the file back to 64 MiB); writers wait in the writer queue
    /// meanwhile. TRUNCATE, which empties the file, cost writes in every A/B round (creation 7–31%,
    /// refresh 7–10%): the WAL then grows its file again from nothing.
    public func checkpointIfDue() {
        guard committedSinceCheck, !isClosed else { return }
        committedSinceCheck = false
        let seen = writerLock?.checkpointMark
        let last = seen.map { Int32(clamping: $0) } ?? walAtLastCheckpoint
        // Below the mark, the WAL has started over since.
        let grown = walPages >= last ? walPages - last : walPages
        guard grown >= checkpointPages else { return }
        if let writerLock, let seen, !writerLock.claimCheckpoint(seen: seen, frames: UInt64(walPages)) { return }
        checkpoints += 1
        if checkpointer == nil, let path = checkpointerPath {
            // Inline this time when it cannot start; tried again at the next due checkpoint (a
            // failed open, no descriptor or thread to spare for a moment, used to make every later
            // checkpoint of the connection inline: a failure-path audit), unless SQLite is not
            // thread-safe, which does not change.
            checkpointer = Checkpointer(path: path, writerLock: writerLock)
            if checkpointer == nil, sqlite3_threadsafe() == 0 { checkpointerPath = nil }
        }
        if let checkpointer {
            checkpointer.checkpointSoon(claimed: walPages, walLimit: walLimitPages)
            walAtLastCheckpoint = walPages  // the mark, when there is no `-writer` page to hold it
            return
        }
        let log = Self.checkpoint(handle, writerLock: writerLock, walLimit: walLimitPages, flushEachPassive: false)
        // A failed checkpoint (-1: an operator's checkpoint held the lock, say) keeps the claim:
        // the stretch is tried again once the WAL has grown another `checkpointPages`.
        walAtLastCheckpoint = log >= 0 ? log : walPages
        writerLock?.recordCheckpoint(frames: UInt64(walAtLastCheckpoint))
    }

    /// Runs the checkpoints asked for by `checkpointIfDue` (a worker's; nil without a thread-safe
    /// SQLite or on a read-only file, and then they run inline). Started with the first
    /// checkpoint, not with the connection: a worker that never writes much, a CGI process or a
    /// store opened for a moment start no thread and open no second connection (and a starting
    /// worker opens one connection, not two, while its siblings start too).
    private(set) var checkpointer: Checkpointer?
    /// The database file's path, for the `checkpointer` (nil: checkpoints run inline).
    private var checkpointerPath: String?

    /// Waits until the checkpoints asked for so far have run (tests; nothing to wait for inline).
    func waitForCheckpoints() { checkpointer?.waitUntilIdle() }

    /// One checkpoint through `handle` (see `checkpointIfDue`): passive, and once the WAL holds
    /// `walLimit` frames, a RESTART. Returns the WAL's length in frames, -1 when SQLite refused.
    /// `flushEachPassive`: flush the database file after a passive checkpoint too (off the
    /// worker's thread only: the `Checkpointer`).
    static func checkpoint(_ handle: OpaquePointer, writerLock: WriterLock?, walLimit: Int32, flushEachPassive: Bool) -> Int32 {
        var log: Int32 = 0, copied: Int32 = 0
        let rc = sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
        guard rc == SQLITE_OK else { return -1 }
        guard log >= walLimit else {
            if flushEachPassive { syncDatabaseFile(handle) }
            return log
        }
        // Before holding the writers: flush what the passive checkpoints copied (see
        // `syncDatabaseFile`), copy what came in meanwhile, and again while that was more than a
        // little; the RESTART then copies and syncs only the rest.
        var rounds = 0, previous: Int32
        repeat {
            syncDatabaseFile(handle)
            previous = log
            sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, &log, &copied)
            rounds += 1
        } while log >= previous + 256 && rounds < 4
        syncDatabaseFile(handle)
        // A long reader (an operator's query) makes this give up until the next due checkpoint.
        checkpointHoldingWriters(handle, writerLock: writerLock, mode: SQLITE_CHECKPOINT_RESTART, log: &log, copied: &copied)
        return log
    }

    /// A checkpoint that needs the writers held (RESTART, TRUNCATE): taken in the writers' queue,
    /// and waiting briefly for readers, since every writer waits meanwhile (a worker's reads take
    /// microseconds). Returns SQLite's result: SQLITE_BUSY when a reader kept it from finishing.
    @discardableResult
    static func checkpointHoldingWriters(
        _ handle: OpaquePointer, writerLock: WriterLock?, mode: Int32, log: UnsafeMutablePointer<Int32>? = nil,
        copied: UnsafeMutablePointer<Int32>? = nil
    ) -> Int32 {
        let queued = writerLock?.lock() ?? false
        defer { if queued { writerLock?.unlock() } }
        installBusyHandler(handle, naps: 200)
        defer { installBusyHandler(handle) }
        return sqlite3_wal_checkpoint_v2(handle, nil, mode, log, copied)
    }

    /// Empties the WAL (a TRUNCATE checkpoint); false when it could not now. It waits for readers
    /// while every writer waits for it, so it waits briefly, as the RESTART above: a reader
    /// holding an old snapshot (a `.backup`) kept the workers' writes waiting 8.5 s through the
    /// whole busy wait (a review). A WAL it could not empty is emptied by a later prune.
    @discardableResult
    public func truncateWAL() -> Bool {
        guard !isClosed else { return false }
        // Copied first without holding anyone: the TRUNCATE then copies what little came since
        // while writers wait (a review: 52 ms for 4,000 frames).
        sqlite3_wal_checkpoint_v2(handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        return Self.checkpointHoldingWriters(handle, writerLock: writerLock, mode: SQLITE_CHECKPOINT_TRUNCATE) == SQLITE_OK
    }

    /// Flushes the database file to disk (SQLite's own sync of its own file descriptor).
    ///
    /// SQLite syncs the database file at the end of a checkpoint only when the copy reached the
    /// end of the WAL. Under steady writes it never does: others have always committed more by
    /// then. So every page the passive checkpoints copied since the WAL last started over waited
    /// in the kernel's page cache, and the RESTART (which does reach the end, writers being held)
    /// flushed them all while every writer waited: 3 ms after the first 64 MiB of creations,
    /// 25 ms once the database had grown to 50 MB (one `fdatasync` of 19.5 ms under strace).
    /// Flushing first, writers still running, leaves the RESTART 0–5 ms of work. On a database of
    /// 1 M sessions one flush took 100–150 ms and what came in meanwhile took the RESTART 27 ms
    /// to copy and sync: the `Checkpointer` now flushes after every passive checkpoint, and
    /// before the RESTART it flushes and copies in up to four rounds until less than 256 frames
    /// came in during the last (RESTART 2–8 ms; creation p99 30 ms against 59–93 ms).
    static func syncDatabaseFile(_ handle: OpaquePointer) {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
            let file, let methods = file.pointee.pMethods
        else { return }
        _ = methods.pointee.xSync(file, SQLITE_SYNC_NORMAL)
    }

    /// The size a WAL is cut back to after a checkpoint lets it start over (`journal_size_limit`).
    static let walSizeLimitBytes = 64 << 20

    /// The WAL size, in frames, past which `checkpointIfDue` makes it start over: 64 MiB of 4 KiB
    /// pages, `walSizeLimitBytes`. Tests set it lower.
    public var walLimitPages = Int32(walSizeLimitBytes / 4096)

    /// The settings of a connection whose WAL the `Checkpointer` copies back, rather than
    /// SQLite inside whichever commit crosses its threshold: no automatic checkpoints, the WAL
    /// cut back to `walSizeLimitBytes` after one, and a page cache of `cacheKiB`. Best effort:
    /// a setting refused costs speed, not correctness.
    func applyCheckpointingPragmas(cacheKiB: Int) {
        try? execute("PRAGMA wal_autocheckpoint=0")
        try? execute("PRAGMA journal_size_limit=\(Self.walSizeLimitBytes)")
        try? execute("PRAGMA cache_size=-\(cacheKiB)")
    }

    /// Checkpoints this connection began (tests count them).
    private(set) var checkpoints = 0

    /// The mark of a connection without a `-writer` page (see `checkpointIfDue`).
    private var walAtLastCheckpoint: Int32 = 0

    func error(_ rc: Int32, sql: String?) -> DatabaseError {
        DatabaseError(resultCode: rc, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }
}
