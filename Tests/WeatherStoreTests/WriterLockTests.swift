import Foundation
import Testing
import WeatherCore
@testable import WeatherStore

/// The writers' queue: exclusive, gives up at its deadline, survives a holder that died, and is
/// set up afresh after a reboot.
@Suite struct WriterLockTests {
    func lockFile() throws -> String {
        let dir = try scratchDirectory("cw-lock")
        return dir.appendingPathComponent("w.sqlite3-writer").path
    }

    /// Takes `lock` on a thread that then ends without letting it go, as a killed worker would
    /// (and without announcing anything): the mutex is "owner dead" afterwards.
    /// Joined with `pthread_join`, not watched through `Thread.isFinished`: Foundation says a
    /// thread finished before the kernel, as the thread exits, marks the robust mutexes it holds
    /// "owner dead", and a fresh clone's CI run once found the turn still held just after
    /// (`openingThePageTakesADeadHoldersTurnOver`, session 29). `pthread_join` returns once the
    /// kernel has cleared the thread's id, which it does after walking its robust list.
    func leaveHeldByAThreadThatEnded(_ lock: WriterLock) {
        let context = Unmanaged.passRetained(lock).toOpaque()
        var holder = pthread_t()
        let created = pthread_create(
            &holder, nil,
            { raw in
                let lock = Unmanaged<WriterLock>.fromOpaque(raw!).takeRetainedValue()
                _ = lock.lock()
                return nil
            }, context)
        precondition(created == 0, "pthread_create: \(created)")
        pthread_join(holder, nil)
    }

    @Test func oneHolderAtATimeAndWaitingEndsAtTheDeadline() throws {
        let path = try lockFile()
        let a = try #require(WriterLock(path: path, timeout: 0))
        let b = try #require(WriterLock(path: path, timeout: 0))
        #expect(a.lock())
        #expect(!b.lock(), "held by a: b gives up at its deadline instead of waiting forever")
        a.unlock()
        #expect(b.lock())
        b.unlock()
    }

    /// A holder that stays (stopped, not dead) costs a connection one timed-out wait, not one per
    /// write: its next transactions only try the queue (SQLite's own lock decides), until they
    /// get a turn again; then waiting resumes.
    @Test func afterATimedOutWaitAConnectionOnlyTriesUntilItHasATurn() throws {
        let path = try lockFile().replacingOccurrences(of: "-writer", with: "")
        let db = try Database(path: path)
        db.attachWriterPage(waitSeconds: 1)
        try db.execute("CREATE TABLE t (x INTEGER)")
        let holder = try #require(WriterLock(path: path + "-writer", timeout: 0))
        func insert() throws -> Duration {
            let clock = ContinuousClock(), started = clock.now
            try db.transaction { try db.run("INSERT INTO t VALUES (1)", []) }
            return clock.now - started
        }
        #expect(holder.lock())
        #expect(try insert() >= .milliseconds(900), "the first write waits its turn for a second")
        let quick = try (0..<5).map { _ in try insert() }
        #expect(quick.allSatisfy { $0 < .milliseconds(500) }, "then it only tries (a wait would be a second): \(quick)")
        holder.unlock()
        _ = try insert()  // a turn: waiting resumes
        #expect(holder.lock())
        #expect(try insert() >= .milliseconds(900), "with a turn had since, it waits again")
        holder.unlock()
        #expect(try db.scalarInt("SELECT count(*) FROM t", []) == 8)
    }

    @Test func aHolderThatDiedIsTakenOver() throws {
        let path = try lockFile()
        let lock = try #require(WriterLock(path: path, timeout: 2))
        leaveHeldByAThreadThatEnded(lock)
        #expect(lock.lock(), "owner dead: the next writer takes the lock over")
        lock.unlock()
    }

    /// A holder that died may have died between its COMMIT and announcing the revocation that
    /// commit made (`Database.transaction`): the next holder announces it, so that no worker
    /// keeps serving a revoked session's grant (a review of the state workers share; its drill
    /// killed a revoking process there, and the retried revoke announced nothing).
    @Test func aHolderThatDiedLeavesARevocationAnnounced() throws {
        let path = try lockFile()
        let lock = try #require(WriterLock(path: path, timeout: 2))
        let before = lock.revocationGeneration
        leaveHeldByAThreadThatEnded(lock)
        #expect(lock.revocationGeneration == before, "nothing announced while the holder lived")
        #expect(lock.lock())
        #expect(lock.revocationGeneration == before + 1, "taken over from a dead holder: announced")
        lock.unlock()
        #expect(lock.lock())
        lock.unlock()
        #expect(lock.revocationGeneration == before + 1, "an ordinary turn announces nothing")
    }

    /// The worker that replaces a killed one (or `weatherctl`) takes a dead holder's turn over as
    /// it opens the page: the revocation that holder may have committed is announced then, not
    /// only at the machine's next write.
    @Test func openingThePageTakesADeadHoldersTurnOver() throws {
        let path = try lockFile().replacingOccurrences(of: "-writer", with: "")
        try Database(path: path).execute("CREATE TABLE t (x INTEGER)")
        let lock = try #require(WriterLock(path: path + "-writer", timeout: 0))
        let before = lock.revocationGeneration
        leaveHeldByAThreadThatEnded(lock)
        let replacement = try Database(path: path)
        replacement.attachWriterPage(waitSeconds: 0)
        #expect(lock.revocationGeneration == before + 1, "announced as the page was opened")
        #expect(lock.lock(), "and the turn is free")
        lock.unlock()
        let another = try Database(path: path)
        another.attachWriterPage(waitSeconds: 0)
        #expect(lock.revocationGeneration == before + 1, "a free turn announces nothing")
    }

    @Test func aLockFileFromAnotherBootIsSetUpAfresh() throws {
        let path = try lockFile()
        let lock = try #require(WriterLock(path: path, timeout: 0))
        // The bytes of a mutex held when the machine went down: locked by a thread that is gone,
        // with no kernel left to mark it "owner dead". Taken while another thread holds it.
        let fd = open(path, O_RDWR)
        defer { close(fd) }
        var lockedImage = [UInt8](repeating: 0, count: 4096)
        let taken = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let shared = lock
        Thread {
            _ = shared.lock()
            taken.signal()
            release.wait()
            shared.unlock()
            finished.signal()
        }.start()
        taken.wait()
        #expect(lockedImage.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, 0) } == 4096)
        release.signal()
        finished.wait()
        #expect(lockedImage.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, 0) } == 4096)

        let sameBoot = try #require(WriterLock(path: path, timeout: 0))
        #expect(!sameBoot.lock(), "within one boot such a mutex counts as held (until its deadline)")
        // The same file seen after a reboot: another boot id.
        #expect(pwrite(fd, "00000000-0000-0000-0000-000000000000", 36, 8) == 36)
        let afterReboot = try #require(WriterLock(path: path, timeout: 0))
        #expect(afterReboot.lock(), "set up afresh, so free")
        afterReboot.unlock()
        // The same locked image from a process that could read no boot id (zeros recorded): it
        // may be of another boot too, so it is set up afresh as well, not kept held for ever.
        #expect(lockedImage.withUnsafeBytes { pwrite(fd, $0.baseAddress, 4096, 0) } == 4096)
        #expect([UInt8](repeating: 0, count: 40).withUnsafeBytes { pwrite(fd, $0.baseAddress, 40, 8) } == 40)
        let noBootId = try #require(WriterLock(path: path, timeout: 0))
        #expect(noBootId.lock(), "a page without a boot id is set up afresh, so free")
        noBootId.unlock()
    }

    @Test func aStoreQueuesItsWritesBesideTheDatabase() throws {
        let dir = try scratchDirectory("cw-lock")
        let store = try SQLiteGatewayStore(path: dir.appendingPathComponent("w.sqlite3").path)
        #expect(try store.consume([LimitBucket(key: "k", quota: Quota(limit: 2, window: 60))], nowMs: 0) == .allowed)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("w.sqlite3-writer").path))
        // Whoever may write the database may use its queue: the page gets the database's mode.
        let modes = try ["w.sqlite3", "w.sqlite3-writer"].map {
            (try FileManager.default.attributesOfItem(atPath: dir.appendingPathComponent($0).path)[.posixPermissions] as? Int ?? -1) & 0o666
        }
        #expect(modes[0] == modes[1])
        #expect(store.revocationsReachWorkers)

        // A database made read-only for a moment leaves its page writable by its owner: the
        // next opening gave the page 0444, and no later worker or weatherctl could write it.
        let db = dir.appendingPathComponent("w.sqlite3").path, page = db + "-writer"
        #expect(chmod(db, 0o444) == 0)
        #expect(WriterLock(databasePath: db) != nil)
        func mode(_ path: String) throws -> Int { (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1) & 0o777 }
        #expect(try mode(page) == 0o644)
        #expect(chmod(db, 0o640) == 0)
        #expect(WriterLock(databasePath: db) != nil)
        #expect(try mode(page) == 0o640, "and follows the database's mode again")

        // A `-wal` made while the database was 0444 (a worker started then) gets the database's
        // mode back at the next opening: it stayed 0444, and every later writer met "readonly".
        #expect(FileManager.default.fileExists(atPath: db + "-wal"), "the first store holds the WAL open")
        #expect(chmod(db + "-wal", 0o444) == 0)
        let next = try SQLiteGatewayStore(path: db)
        #expect(try mode(db + "-wal") == 0o640)
        #expect(try next.consume([LimitBucket(key: "k2", quota: Quota(limit: 2, window: 60))], nowMs: 0) == .allowed)
    }

    @Test func checkpointsWaitForAfterResponse() throws {
        let dir = try scratchDirectory("cw-ckpt")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let store = try SQLiteGatewayStore(path: path)
        func fileSize() throws -> Int { try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0 }
        let before = try fileSize()
        // Commits of the store's own connection (a take no longer writes: the shared rate table).
        func commit(_ key: String) throws {
            try store.db.transaction { try store.db.run("INSERT INTO weather_rate_limits(bucket_key, tat_ms) VALUES (?1, 1)", [.text(key)]) }
        }
        var i = 0
        while store.db.walPages < store.db.checkpointPages {
            try commit("bucket-\(i)-" + String(repeating: "x", count: 200))
            i += 1
        }
        #expect(try fileSize() == before, "no commit copied the WAL back by itself")
        store.afterResponse()
        store.db.waitForCheckpoints()
        let afterCheckpoint = try fileSize()
        #expect(afterCheckpoint > before, "the checkpoint after the response did")
        // A few more commits are not yet worth another checkpoint.
        for j in 0..<50 {
            try commit("more-\(j)-" + String(repeating: "y", count: 200))
        }
        store.afterResponse()
        store.db.waitForCheckpoints()
        #expect(try fileSize() == afterCheckpoint)
    }

    /// Two workers share the checkpoint mark: each stretch of the WAL is copied back by one of
    /// them, not by both (with a mark per connection, the second one checkpointed too).
    @Test func oneWorkerCheckpointsEachStretchOfTheWAL() throws {
        let dir = try scratchDirectory("cw-ckpt")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let a = try SQLiteGatewayStore(path: path), b = try SQLiteGatewayStore(path: path)
        var i = 0
        func write(_ store: SQLiteGatewayStore) throws {
            let key = "bucket-\(i)-" + String(repeating: "x", count: 200)
            try store.db.transaction { try store.db.run("INSERT INTO weather_rate_limits(bucket_key, tat_ms) VALUES (?1, 1)", [.text(key)]) }
            i += 1
        }
        while a.db.walPages < a.db.checkpointPages { try write(a) }
        // A reader of the moment keeps the WAL from starting over, as the other workers' reads do.
        let reader = try Database(path: path)
        try reader.execute("BEGIN")
        _ = try reader.scalarInt("SELECT count(*) FROM sqlite_master")
        defer { try? reader.execute("COMMIT") }
        a.afterResponse()
        a.db.waitForCheckpoints()
        #expect(a.db.checkpoints == 1)
        try write(b)
        b.afterResponse()
        b.db.waitForCheckpoints()
        #expect(b.db.checkpoints == 0, "a's checkpoint covered the WAL b's commit ended")
        let next = a.db.walPages + b.db.checkpointPages
        while b.db.walPages < next { try write(b) }
        b.afterResponse()
        b.db.waitForCheckpoints()
        #expect(b.db.checkpoints == 1, "the next stretch is b's")
        try write(a)
        a.afterResponse()
        a.db.waitForCheckpoints()
        #expect(a.db.checkpoints == 1)
    }

    /// Provider pauses live on the page: what one worker records the other reads, one atomic
    /// word per provider; a ninth provider finds no room; another boot's pauses are forgotten.
    @Test func workersShareProviderPausesOnThePage() throws {
        let dir = try scratchDirectory("cw-pause")
        let path = dir.appendingPathComponent("w.sqlite3").path
        let a = try #require(try SQLiteGatewayStore(path: path).providerPauses)
        let b = try #require(try SQLiteGatewayStore(path: path).providerPauses)
        #expect(b.pause(of: "caiyun") == nil)
        let pause = ProviderPause(failures: 3, until: Timestamp(seconds: 1_796_000_000), failure: 3 | 503 << 8)
        var seen: ProviderPause? = pause
        #expect(
            a.update("caiyun") {
                seen = $0; return pause
            })
        #expect(seen == nil)
        #expect(b.pause(of: "caiyun") == pause)
        #expect(b.pause(of: "visualcrossing") == nil)
        #expect(b.update("caiyun") { previous in previous.map { ProviderPause(failures: $0.failures + 1, until: $0.until, failure: 1) } })
        #expect(a.pause(of: "caiyun")?.failures == 4 && a.pause(of: "caiyun")?.failure == 1)
        #expect(a.update("caiyun") { _ in nil })
        #expect(b.pause(of: "caiyun") == nil)

        // Eight slots: caiyun's (still claimed) and seven more; a ninth name finds none.
        for i in 1...7 { #expect(a.update("provider-\(i)") { _ in pause }) }
        #expect(!a.update("provider-8") { _ in pause })
        #expect(a.pause(of: "provider-8") == nil)
        #expect(b.pause(of: "provider-7") == pause)

        // Counts and times past what a word holds are clamped, not wrapped.
        #expect(a.update("caiyun") { _ in ProviderPause(failures: 1_000, until: Timestamp(seconds: 1 << 40), failure: 2) })
        #expect(b.pause(of: "caiyun") == ProviderPause(failures: 255, until: Timestamp(seconds: Int64(UInt32.max)), failure: 2))

        // After a reboot the slots start empty.
        let fd = open(path + "-writer", O_RDWR)
        defer { close(fd) }
        #expect(pwrite(fd, "00000000-0000-0000-0000-000000000000", 36, 8) == 36)
        let rebooted = try #require(try SQLiteGatewayStore(path: path).providerPauses)
        #expect(rebooted.pause(of: "provider-7") == nil)
        #expect(rebooted.update("provider-8") { _ in pause }, "every slot is free again")
    }
}
