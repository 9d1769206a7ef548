import CSQLite
#if canImport(Glibc)
import Glibc
#endif

/// Checkpoints a worker's database on a thread and a connection of its own, so that the thread
/// serving requests neither copies the WAL back nor waits for the disk (`Database.checkpointIfDue`
/// decides when, this does it).
///
/// On a database of 1 M sessions a passive checkpoint of 4,000 frames took the worker 24–30 ms,
/// and each RESTART that bounds the WAL was preceded by 70–150 ms of flushing the database file,
/// all of it time in which that worker served nobody. Here the worker only asks; this thread runs
/// `Database.checkpoint`, which also flushes the database file after each passive checkpoint so
/// that the RESTART finds little left. While it runs the RESTART it holds the writer queue like
/// any writer, so the worker's next write waits for it (2–8 ms).
///
/// The connection is the thread's alone (SQLite's multi-thread mode: one connection, one thread
/// at a time); it is opened on the caller's thread and closed by `stop()` after the thread ended.
/// Without a thread-safe SQLite library (`sqlite3_threadsafe() == 0`) there is no checkpointer and
/// the worker checkpoints inline, as before.
final class Checkpointer: @unchecked Sendable {
    private let connection: Database
    private let writerLock: WriterLock?
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var thread = pthread_t()
    // Guarded by `mutex`.
    private var asked = 0, served = 0
    private var running = false, stopping = false
    private var claimed: Int32 = 0, walLimit: Int32 = 0
    private var runs = 0

    /// A running checkpointer for the database at `path`; nil when it cannot have one. The file is
    /// never created: one deleted or moved under the worker would otherwise come back empty, a
    /// database without the schema that the next worker to start would take for a new one.
    init?(path: String, writerLock: WriterLock?) {
        guard sqlite3_threadsafe() != 0, let connection = try? Database(path: path, create: false) else { return nil }
        // It reads no table: a checkpoint copies frames through a buffer of its own.
        connection.applyCheckpointingPragmas(cacheKiB: 64)
        self.connection = connection
        self.writerLock = writerLock
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
        // The thread takes no signal: SIGTERM must reach the worker's thread, whose `accept` it
        // interrupts (delivered here, it would set the stop flag but leave the worker waiting in
        // `accept` for one more connection). It is created with every signal blocked.
        var all = sigset_t(), previous = sigset_t()
        sigfillset(&all)
        pthread_sigmask(SIG_SETMASK, &all, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        let context = Unmanaged.passRetained(self).toOpaque()
        guard
            pthread_create(
                &thread, nil,
                { context in
                    Unmanaged<Checkpointer>.fromOpaque(context!).takeRetainedValue().run()
                    return nil
                }, context) == 0
        else {
            Unmanaged<Checkpointer>.fromOpaque(context).release()
            return nil
        }
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    /// Asks for a checkpoint and returns at once. `claimed` is the WAL length the caller claimed
    /// (recorded as the mark if the checkpoint cannot run); asks made while one runs are served
    /// by one more run.
    func checkpointSoon(claimed: Int32, walLimit: Int32) {
        pthread_mutex_lock(mutex)
        asked += 1
        self.claimed = claimed
        self.walLimit = walLimit
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
    }

    /// Waits until every checkpoint asked for has run.
    func waitUntilIdle() {
        pthread_mutex_lock(mutex)
        while (asked != served || running) && !stopping { pthread_cond_wait(changed, mutex) }
        pthread_mutex_unlock(mutex)
    }

    /// Checkpoints run so far.
    var runsMade: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return runs
    }

    /// Ends the thread after the checkpoint it is running, if any, then closes its connection.
    func stop() {
        pthread_mutex_lock(mutex)
        stopping = true
        pthread_cond_broadcast(changed)
        pthread_mutex_unlock(mutex)
        pthread_join(thread, nil)
        connection.close()
    }

    private func run() {
        pthread_mutex_lock(mutex)
        while true {
            while asked == served && !stopping { pthread_cond_wait(changed, mutex) }
            if stopping { break }
            served = asked
            running = true
            let claimed = self.claimed, walLimit = self.walLimit
            pthread_mutex_unlock(mutex)
            let log = Database.checkpoint(connection.handle, writerLock: writerLock, walLimit: walLimit, flushEachPassive: true)
            writerLock?.recordCheckpoint(frames: UInt64(log >= 0 ? log : claimed))
            pthread_mutex_lock(mutex)
            running = false
            runs += 1
            pthread_cond_broadcast(changed)
        }
        pthread_mutex_unlock(mutex)
    }
}
