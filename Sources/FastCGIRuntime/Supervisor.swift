import CFastCGI
#if canImport(Glibc)
import Glibc
#endif

/// A tiny process manager: keeps `workers` children serving the same listening socket, restarts
/// any that die (a crash loses only the request in flight on that worker), and on SIGTERM stops
/// them all gracefully. spawn-fcgi starts workers but never restarts them; this does.
public enum Supervisor {
    /// Forks `workers` children that each call `child()` and exit with its status. Returns in the
    /// parent when all children are gone after SIGTERM/SIGINT.
    public static func run(workers: Int, child: () -> Int32) -> Never {
        FastCGIServer.installSignalHandlers()

        var children: Set<pid_t> = []
        func spawn() {
            let pid = fork()
            if pid == 0 {
                // If the supervisor is killed outright, its workers must not linger on the socket.
                _ = cfastcgi_set_parent_death_signal(SIGTERM)
                exit(child())
            }
            if pid > 0 { children.insert(pid) }
        }
        for _ in 0..<workers where shutdownRequested == 0 { spawn() }

        // Polling keeps this simple and race-free: a SIGTERM that lands between a check and a
        // blocking waitpid() could otherwise leave the supervisor waiting on workers forever.
        var recentDeaths: [Int64] = []
        var told = false
        while !children.isEmpty {
            if shutdownRequested != 0 && !told {
                for c in children { kill(c, SIGTERM) }
                told = true
            }
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            if pid == 0 || (pid < 0 && errno == EINTR) {
                usleep(50_000)
                continue
            }
            if pid < 0 { break }
            children.remove(pid)
            guard shutdownRequested == 0 else { continue }
            // A worker that dies at once again and again (bad config, full disk) must not turn
            // into a fork storm: slow down when more than `workers` deaths happen within 5 s.
            let now = Int64(time(nil))
            recentDeaths = recentDeaths.filter { now - $0 < 5 } + [now]
            if recentDeaths.count > workers { sleep(1) }
            guard shutdownRequested == 0 else { continue }  // SIGTERM may have ended the sleep
            spawn()
        }
        exit(0)
    }
}
