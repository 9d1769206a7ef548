import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// Flushes one connection's database file to disk on a thread of its own, so that the worker
/// serving requests never waits for the disk (`Database.checkpointIfDue`).
///
/// Under steady writes SQLite's passive checkpoints copy pages into the database file but never
/// sync it (see `Database.syncDatabaseFile`), so the copies pile up in the kernel until the next
/// checkpoint that reaches the end of the WAL, the RESTART that bounds it. On a database of 1 M
/// sessions that sync took 100–150 ms of the checkpointing worker's time every 64 MiB of WAL.
/// Asked after every passive checkpoint, this thread flushes them while the worker goes on.
///
/// It calls only the file's own `xSync` (SQLite's unix VFS: `fdatasync` on its descriptor), never
/// the connection, whose other users stay on the worker's thread; the first sync is made on the
/// caller's thread, so that the VFS's one-time directory sync (the only state `xSync` changes) is
/// done before the thread starts. `stop()` (called before the connection closes) waits for it.
final class DatabaseFlusher: @unchecked Sendable {
    private let file: UnsafeMutablePointer<sqlite3_file>
    private let sync: @convention(c) (UnsafeMutablePointer<sqlite3_file>?, Int32) -> Int32
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let wake = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var thread = pthread_t()
    // Guarded by `mutex`.
    private var asked = 0
    private var stopping = false
    private var flushes = 0
    /// Flushes made so far (tests read it).
    var flushesMade: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return flushes
    }

    /// The flusher of `handle`'s main database file, running; nil when there is no file to sync.
    init?(handle: OpaquePointer) {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
              let file, let sync = file.pointee.pMethods?.pointee.xSync else { return nil }
        self.file = file
        self.sync = sync
        _ = sync(file, SQLITE_SYNC_NORMAL)
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(wake, nil)
        let context = Unmanaged.passRetained(self).toOpaque()
        guard pthread_create(&thread, nil, { context in
            let flusher = Unmanaged<DatabaseFlusher>.fromOpaque(context!).takeRetainedValue()
            flusher.run()
            return nil
        }, context) == 0 else {
            Unmanaged<DatabaseFlusher>.fromOpaque(context).release()
            return nil
        }
    }

    deinit {
        pthread_cond_destroy(wake)
        pthread_mutex_destroy(mutex)
        wake.deallocate()
        mutex.deallocate()
    }

    /// Asks for a flush and returns at once; asks made while one runs are served by one more.
    func flushSoon() {
        pthread_mutex_lock(mutex)
        asked += 1
        pthread_cond_signal(wake)
        pthread_mutex_unlock(mutex)
    }

    /// Ends the thread after the flush it is making, if any, and waits for it.
    func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pthread_cond_signal(wake)
        pthread_mutex_unlock(mutex)
        pthread_join(thread, nil)
    }

    private func run() {
        pthread_mutex_lock(mutex)
        var served = 0
        while true {
            while asked == served && !stopping { pthread_cond_wait(wake, mutex) }
            if stopping { break }
            served = asked
            pthread_mutex_unlock(mutex)
            _ = sync(file, SQLITE_SYNC_NORMAL)
            pthread_mutex_lock(mutex)
            flushes += 1
        }
        pthread_mutex_unlock(mutex)
    }
}
