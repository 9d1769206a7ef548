import CFastCGI
import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// A tiny process manager: keeps `workers` children serving the same listening socket, restarts
/// any that die (a crash loses only the request in flight on that worker), and on SIGTERM stops
/// them all gracefully. spawn-fcgi starts workers but never restarts them; this does.
public enum Supervisor {
    /// How long workers have to finish after SIGTERM before they are killed. Below the systemd
    /// unit's `TimeoutStopSec` (15 s), so the supervisor ends them itself: a worker finishing a
    /// request that hangs on a web server which stopped reading, or one waiting on a kept
    /// connection (`FCGI_KEEP_CONN`) when the stop landed just before its read.
    static let stopGraceSeconds: Int64 = 12

    /// Forks `workers` children that each call `child()` and exit with its status. Exits when all
    /// children are gone after SIGTERM/SIGINT (0), or when not one worker could be started (71,
    /// after `givingUp`, which removes what the start made: the socket file). Workers that die or
    /// cannot be started are reported to `log`.
    public static func run(workers: Int, log: any LogSink, givingUp: () -> Void = {}, child: () -> Int32) -> Never {
        FastCGIServer.installSignalHandlers()
        // Inherited as ignored (some wrappers do), SIGCHLD would make the kernel reap the workers
        // itself: waitpid would never see one die, and none would be replaced.
        signal(SIGCHLD, SIG_DFL)

        var children: Set<pid_t> = []
        var missing = 0  // workers that should run but could not be forked
        var retryAt: Int64 = 0
        var recentDeaths: [Int64] = []
        var forkFailureLoggedAt: Int64?
        func now() -> Int64 { MonotonicTime.milliseconds() / 1000 }
        let supervisor = getpid()
        func spawn() {
            let pid = fork()
            if pid == 0 {
                // If the supervisor is killed outright, its workers must not linger on the socket.
                // One that died between the fork and this call is not there to signal: checked.
                _ = cfastcgi_set_parent_death_signal(SIGTERM)
                if getppid() != supervisor { exit(0) }
                exit(child())
            }
            if pid > 0 {
                children.insert(pid)
                return
            }
            // EAGAIN: a process or thread limit (TasksMax, RLIMIT_NPROC, a shared host's cap).
            let reason = String(cString: strerror(errno))
            missing += 1
            retryAt = now() + 1
            // Once a minute at most: a limit that holds would otherwise write a line a second.
            if forkFailureLoggedAt.map({ now() - $0 >= 60 }) ?? true {
                forkFailureLoggedAt = now()
                log.write("weather-fcgi: cannot start a worker (\(reason)); \(children.count) running, trying again every second")
            }
        }
        for _ in 0..<workers where shutdownRequested == 0 { spawn() }
        guard !children.isEmpty || shutdownRequested != 0 else {
            log.write("weather-fcgi: no worker could be started")
            givingUp()
            exit(71)
        }

        // Polling keeps this simple and race-free: a SIGTERM that lands between a check and a
        // blocking waitpid() could otherwise leave the supervisor waiting on workers forever.
        var toldAt: Int64?
        var killed = false
        while !children.isEmpty || (missing > 0 && shutdownRequested == 0) {
            if shutdownRequested != 0 {
                if toldAt == nil {
                    for c in children { kill(c, SIGTERM) }
                    toldAt = now()
                } else if !killed, let toldAt, now() - toldAt >= stopGraceSeconds {
                    log.write("weather-fcgi: \(children.count) worker(s) still running \(stopGraceSeconds) s after SIGTERM; killing them")
                    for c in children { kill(c, SIGKILL) }
                    killed = true
                }
            } else if missing > 0 && now() >= retryAt {
                missing -= 1
                spawn()
                if missing == 0 { forkFailureLoggedAt = nil }
            }
            var status: Int32 = 0
            let pid = waitpid(-1, &status, WNOHANG)
            // ECHILD with none running: every worker is still to be forked again.
            if pid == 0 || (pid < 0 && (errno == EINTR || errno == ECHILD && children.isEmpty)) {
                usleep(50_000)
                continue
            }
            if pid < 0 { break }
            guard children.remove(pid) != nil else { continue }
            guard shutdownRequested == 0 else { continue }
            // Status 0 is a worker that retired on purpose (`WEATHER_MAX_REQUESTS` served, or a
            // stop signal of its own): replaced at once, however busy, where counting it as a
            // death capped the service at about `WEATHER_MAX_REQUESTS` requests a second. Every
            // failure exits otherwise (78 configuration, 71 socket, a signal).
            if status != 0 {
                // A worker that dies at once again and again (bad config, full disk) must not turn
                // into a fork storm: slow down when more than `workers` deaths happen within 5 s.
                let t = now()
                recentDeaths = recentDeaths.filter { t - $0 < 5 } + [t]
                let slowing = recentDeaths.count > workers
                log.write(
                    "weather-fcgi: worker \(pid) \(Self.describe(status: status)); starting another"
                        + (slowing ? " in 1 s (\(recentDeaths.count) ended within 5 s)" : ""))
                if slowing { sleep(1) }
                guard shutdownRequested == 0 else { continue }  // SIGTERM may have ended the sleep
            }
            spawn()
        }
        exit(0)
    }

    /// A `waitpid` status in words: `was killed by signal 9 (Killed)`, `exited with status 78`.
    static func describe(status: Int32) -> String {
        let signal = status & 0x7f
        guard signal != 0 else { return "exited with status \((status >> 8) & 0xff)" }
        let name = strsignal(signal).map { String(cString: $0) } ?? "unknown"
        return "was killed by signal \(signal) (\(name))" + (status & 0x80 != 0 ? ", core dumped" : "")
    }
}
