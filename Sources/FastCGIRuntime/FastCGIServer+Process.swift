import CFastCGI
#if canImport(Glibc)
import Glibc
#endif

/// The worker process around the serving: signals, descriptors, the heap, and how it was started.
extension FastCGIServer {
    /// Catches the stop signals into `shutdownRequested`. Call it first thing in `main`: a SIGTERM
    /// that arrives while the program is still starting must stop it cleanly, not be lost or kill
    /// it half-way. Idempotent.
    public static func installSignalHandlers() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            shutdownRequested = 1
            // dup2 is async-signal-safe; errno is kept for the code this interrupted.
            if listenFDForStop >= 0 {
                let saved = errno
                dup2(stopStandIn, listenFDForStop)
                errno = saved
            }
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: accept() must return EINTR so the loop can end
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGINT, &action, nil)
        sigaction(SIGUSR1, &action, nil)  // Apache's mod_fcgid graceful stop
        // A hang-up (the terminal of a start by hand closing) stops as gracefully, so what a
        // worker counted is written; unless it came ignored (`nohup`), which is kept.
        if cfastcgi_signal_is_ignored(SIGHUP) == 0 { sigaction(SIGHUP, &action, nil) }
        signal(SIGPIPE, SIG_IGN)
        unblockStopSignals()
    }

    /// Descriptors a worker holds before it takes a connection: standard streams, the socket,
    /// the database, its `-wal`, `-shm` and `-writer`, the checkpointer's connection, and one
    /// for a provider call, with room to spare.
    public static let descriptorsNeeded: rlim_t = 32

    /// Raises the soft limit on open files towards the hard one (to 1024 at most) and nil when
    /// `descriptorsNeeded` are then allowed; else why not, for the start-up error. Under
    /// `ulimit -n 8` a worker started and then could take no connection: each `accept` failed
    /// (EMFILE) and was retried every 0.1 s while the web server waited out its timeout, health
    /// included (an operations audit).
    public static func ensureDescriptors() -> String? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let wanted: rlim_t = 1024
        if limit.rlim_cur < wanted && limit.rlim_max > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, wanted)
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        guard limit.rlim_cur < descriptorsNeeded else { return nil }
        return "the open-file limit is \(limit.rlim_cur) (ulimit -n, systemd LimitNOFILE=, or the host's cap); a worker needs at least \(descriptorsNeeded)"
    }

    /// One malloc arena: a worker serves one request at a time, and every extra arena (the provider
    /// client's name-lookup thread would get one) keeps free pages of its own.
    public static func useOneMallocArena() { mallopt(M_ARENA_MAX, 1) }

    /// Hands freed heap pages back to the kernel, so that a burst of large bodies does not stay
    /// in the worker's RSS for good. A few microseconds; call it now and then, not per request.
    public static func trimHeap() { malloc_trim(0) }

    /// True once a stop signal has arrived.
    public static var stopRequested: Bool { shutdownRequested != 0 }

    /// Stops the serve loop as a SIGTERM would: the request in hand (none, when idle) is finished.
    public static func requestStop() { raise(SIGTERM) }

    /// Whether this process was started by Apache (mod_fcgid, its parent), which starts a program
    /// file anew once it changes but keeps the processes of the old file: up to
    /// `FcgidMinProcessesPerClass` (3 by default) of them for as long as Apache runs.
    /// Told by the inherited socket, which mod_fcgid names `<pid>.<n>` in its `FcgidIPCDir`, or
    /// by the parent's name in `/proc/<parent>/comm` (its `exe` is not readable
    /// by a worker running as another user; and under `hidepid`, as on many suEXEC hosts, not
    /// even `comm` is, which is why the socket is asked first).
    public static func startedByApache(listenFD: Int32 = 0) -> Bool {
        // mod_fcgid names each socket `<pid>.<n>` (in its FcgidIPCDir); a spawn-fcgi or systemd
        // socket is named by its operator (`weather.sock`), and its workers must not retire:
        // nothing would start them again.
        if let path = unixSocketPath(listenFD), let name = path.split(separator: "/").last, Self.isModFcgidSocketName(name) { return true }
        let fd = open("/proc/\(getppid())/comm", O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 32) }
        guard n > 0 else { return false }
        let name = String(decoding: buffer[0..<n].prefix { $0 != 10 }, as: UTF8.self)
        return ["apache2", "httpd", "httpd2", "apache", "httpd-prefork", "httpd-worker", "httpd-event"].contains(name)
    }

    /// `<digits>.<digits>`, as mod_fcgid names its sockets.
    static func isModFcgidSocketName(_ name: Substring) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } }
    }

    /// The path a Unix socket `fd` is bound to; nil for anything else.
    static func unixSocketPath(_ fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, Int32(address.sun_family) == AF_UNIX else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Whether the file this process runs has been replaced or removed since it started (an
    /// upgrade renamed a new program over it): Linux then shows the old one as `(deleted)`.
    public static func programReplaced() -> Bool {
        executablePath(of: "self")?.hasSuffix(" (deleted)") ?? false
    }

    /// The target of `/proc/<process>/exe`; nil when it cannot be read.
    static func executablePath(of process: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(process)/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A parent may start us with these blocked (Foundation's `Process` does); a blocked SIGTERM
    /// would never arrive and every stop would end in SIGKILL.
    static func unblockStopSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGUSR1, SIGHUP] { sigaddset(&set, s) }
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }
}
