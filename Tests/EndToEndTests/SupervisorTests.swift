import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The supervisor (`--workers N`), `--listen` and the accept loop, as an audit of the FastCGI
/// runtime found them (session 15): workers retiring on purpose, SIGCHLD inherited as ignored,
/// forks that fail, a bare port, a socket path that is not a dead socket, and peers on the
/// socket that stop half-way through a head or keep sending after their answer.
@Suite(.serialized) struct SupervisorTests {
    /// `GET /v1/health` straight on the FastCGI socket (a path or `host:port`); the status line,
    /// or "" when no answer came within `seconds`.
    static func health(_ socket: String, within seconds: Int = 10) -> String {
        // SIGKILL: Foundation's `Process` starts children with SIGTERM blocked.
        let out = ChildProcessOutput.run(
            "/usr/bin/timeout", ["-s", "KILL", "\(seconds)", "/usr/bin/cgi-fcgi", "-bind", "-connect", socket],
            environment: ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health", "REMOTE_ADDR": "127.0.0.1"])
        return out.split(separator: "\r\n").first.map(String.init) ?? ""
    }

    /// One worker of the built `weather-fcgi` on the Unix socket `w.sock` in `dir`, once it answers.
    static func worker(in dir: URL, env extra: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation) throws
        -> (app: ChildProcess, socket: String)
    {
        let socket = dir.appendingPathComponent("w.sock").path
        let app = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", socket], environment: environment(dir).merging(extra) { $1 })
        try #require(waitUntil { health(socket) == "Status: 200 OK" }, "the worker never answered", sourceLocation: sourceLocation)
        return (app, socket)
    }

    /// The local addresses listening on TCP `port` (`/proc/net/tcp`, hex as the kernel writes them).
    static func tcpListeners(port: Int) -> [String] {
        let hex = String(format: "%04X", port)
        return ((try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)) ?? "").split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            return fields.count > 3 && fields[1].hasSuffix(":\(hex)") && fields[3] == "0A" ? String(fields[1]) : nil
        }
    }

    static func scratch() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-sup-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir.appendingPathComponent("data"), withIntermediateDirectories: true)
        return dir
    }

    static func environment(_ dir: URL) -> [String: String] {
        ["WEATHER_DB_PATH": dir.appendingPathComponent("data/weather.sqlite3").path, "PATH": "/usr/sbin:/usr/bin:/bin"]
    }

    /// Workers that retire after `WEATHER_MAX_REQUESTS` (status 0) are replaced at once. They
    /// counted as deaths, so past N retirements in 5 s every restart slept 1 s: 24 requests at
    /// two per worker took 8 s (about `WEATHER_MAX_REQUESTS` requests a second in all).
    @Test func workersRetiringOnPurposeAreReplacedWithoutTheCrashPause() throws {
        let h = try GatewayHarness(workers: 2, env: ["WEATHER_MAX_REQUESTS": "2"])
        let started = Date()
        for _ in 0..<24 {
            #expect(try h.request("GET", "/v1/health").status == 200)
        }
        let elapsed = Date().timeIntervalSince(started)
        // Eight or more of the 1 s pauses before the fix; a few hundred ms of forks after it.
        #expect(elapsed < 6, "24 requests took \(elapsed) s")
        let workers = Set(h.log.split(separator: "\n").compactMap { line in line.split(separator: " ").first { $0.hasPrefix("worker=") } })
        #expect(workers.count >= 10, "\(workers.count) workers answered")
    }

    /// Started with SIGCHLD ignored (some wrappers leave it so), a killed worker was never
    /// replaced: the kernel reaped it, and waitpid never saw it die.
    @Test func aWorkerKilledUnderAnInheritedIgnoredSIGCHLDIsReplaced() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("w.sock").path
        let wrapper = "import os, signal, sys\nsignal.signal(signal.SIGCHLD, signal.SIG_IGN)\nos.execv(sys.argv[1], sys.argv[1:])"
        let app = try ChildProcess(
            "/usr/bin/python3", ["-c", wrapper, "\(binDirectory)/weather-fcgi", "--listen", socket, "--workers", "2"],
            environment: Self.environment(dir), stderr: dir.appendingPathComponent("app.log").path)
        defer { app.stop() }
        #expect(waitUntil { workerPids(app.pid).count == 2 })
        let before = Set(workerPids(app.pid))
        let victim = try #require(before.first)
        kill(victim, SIGKILL)
        #expect(
            waitUntil {
                let now = Set(workerPids(app.pid)); return now.count == 2 && !now.contains(victim)
            }, "\(workerPids(app.pid))")
        #expect(Self.health(socket) == "Status: 200 OK")
    }

    /// A stop that lands after the accept loop's check of its flag and before it enters `accept`
    /// (raised there, after one request, by a debug-build hook) ends the worker at once. It
    /// waited for the next connection or idle wake-up, and with `WEATHER_FLUSH_INTERVAL=0` (no
    /// wake-up) for ever: nothing kills a worker under `--workers 1` or spawn-fcgi.
    @Test func aStopJustBeforeAcceptEndsTheWorkerAtOnce() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, socket) = try Self.worker(in: dir, env: ["WEATHER_FLUSH_INTERVAL": "0", "CW_TEST_STOP_BEFORE_ACCEPT": "1"])
        defer { app.stop() }
        #expect(waitUntil(timeout: 5) { !app.isRunning }, "the worker still waits in accept")
        #expect(app.terminationStatus == 0)
        #expect(Self.health(socket, within: 2) == "", "a stopped worker answered")
    }

    /// A worker leaves no core file whatever limit it was started with (its memory holds the
    /// provider keys and the requests' tokens): soft and hard limit 0, here under a start with
    /// the limit raised as far as it goes (a secrets audit, session 30: only the systemd unit set
    /// `LimitCORE=0`).
    @Test func aWorkerNeverDumpsCore() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("w.sock").path
        let app = try ChildProcess(
            "/usr/bin/prlimit", ["--core=unlimited", "\(binDirectory)/weather-fcgi", "--listen", socket], environment: Self.environment(dir))
        defer { app.stop() }
        try #require(waitUntil { Self.health(socket) == "Status: 200 OK" })
        let limits = try String(contentsOfFile: "/proc/\(app.pid)/limits", encoding: .utf8)
        let core = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") })
        #expect(core.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).prefix(2) == ["0", "0"], "\(core)")
    }

    /// `--listen PORT` listens on 127.0.0.1 only (libfcgi took every interface, where anyone who
    /// reached the port could send any `REMOTE_ADDR`); `0.0.0.0:PORT` still asks for all.
    @Test func aBarePortListensOnLoopbackOnly() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freePort()
        let app = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", "\(port)"], environment: Self.environment(dir))
        defer { app.stop() }
        #expect(waitUntil { !Self.tcpListeners(port: port).isEmpty })
        #expect(Self.tcpListeners(port: port) == ["0100007F:\(String(format: "%04X", port))"])
    }

    /// A `--listen` port outside 1...65535, an address not of this host or a port in use stops
    /// the start with exit 71 and a line naming the address; libfcgi read the port with `atoi`
    /// (99999 listened on 34463, 0 made a Unix socket named `127.0.0.1:0` in the working folder)
    /// and exited with errno as its status. `--socket-mode` without a socket path is refused,
    /// where it was ignored.
    @Test func aBadOrBusyListenAddressStopsTheStartAndSaysWhichAddress() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let busy = freePort()
        let holder = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", "\(busy)"], environment: Self.environment(dir))
        defer { holder.stop() }
        #expect(waitUntil { !Self.tcpListeners(port: busy).isEmpty })
        let cases: [(args: [String], status: Int32, says: String)] = [
            (["--listen", "127.0.0.1:99999"], 71, "cannot listen on 127.0.0.1:99999: the port must be a number from 1 to 65535"),
            (["--listen", "-5"], 71, "cannot listen on -5: the port must be a number from 1 to 65535"),
            (["--listen", "0"], 71, "cannot listen on 0: the port must be a number from 1 to 65535"),
            (["--listen", "weather.sock"], 71, "cannot listen on the --listen value: a PATH must be absolute (otherwise HOST:PORT or PORT)"),
            (["--listen", "\(busy)"], 71, "cannot listen on \(busy): Address already in use"),
            (["--listen", "192.0.2.1:9000"], 71, "cannot listen on 192.0.2.1:9000: Cannot assign requested address"),
            (["--socket-mode", "0660"], 64, "--socket-mode applies to --listen PATH only"),
            (["--listen", "127.0.0.1:\(freePort())", "--socket-mode", "0660"], 64, "--socket-mode applies to --listen PATH only"),
        ]
        for (n, c) in cases.enumerated() {
            let log = dir.appendingPathComponent("start-\(n).log").path
            let app = try ChildProcess("\(binDirectory)/weather-fcgi", c.args, environment: Self.environment(dir), stderr: log)
            #expect(waitUntil { !app.isRunning }, "\(c.args) is still running")
            app.stop()
            #expect(app.terminationStatus == c.status, "\(c.args)")
            let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
            #expect(said.contains("weather-fcgi: " + c.says), "\(c.args): \(said)")
        }
        #expect(!FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/127.0.0.1:0"))
    }

    /// A socket path is taken over only from a dead socket: a second instance (here with a
    /// configuration that cannot start) deleted the socket of the one serving it, and any other
    /// file at that path.
    @Test func aLiveSocketOrAnyOtherFileAtTheListenPathIsLeftAlone() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (first, socket) = try Self.worker(in: dir)
        defer { first.stop() }

        var broken = Self.environment(dir)
        broken["WEATHER_DB_PATH"] = "/nonexistent-folder/weather.sqlite3"
        let log = dir.appendingPathComponent("second.log").path
        let second = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", socket], environment: broken, stderr: log)
        #expect(waitUntil { !second.isRunning })
        #expect(second.terminationStatus == 71)
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains("cannot listen on the --listen path: another process is serving that socket"), "\(said)")
        #expect(!said.contains(socket), "a log line named the path (API.md: no file path in a log line)")
        #expect(Self.health(socket) == "Status: 200 OK", "the first instance's socket is still there")

        let file = dir.appendingPathComponent("notes.txt").path
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        let third = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", file], environment: Self.environment(dir))
        #expect(waitUntil { !third.isRunning })
        #expect(third.terminationStatus == 71)
        #expect((try? String(contentsOfFile: file, encoding: .utf8)) == "keep me")

        // A socket nobody serves (its process died) is taken over.
        first.stop()
        #expect(FileManager.default.fileExists(atPath: socket))
        let fourth = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", socket], environment: Self.environment(dir))
        defer { fourth.stop() }
        #expect(waitUntil { Self.health(socket) == "Status: 200 OK" })
    }

    /// Forks that fail (a process limit) are said and tried again, and a supervisor that could
    /// start no worker at all exits 71; it ran on with fewer workers and said nothing, or exited
    /// 0 leaving its socket behind.
    @Test(needs(isRoot, "root, to run the supervisor as another user under a process limit"))
    func failedForksAreSaidAndTriedAgain() throws {
        try requirePrivilege(isRoot, "root")
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        chmod(dir.path, 0o777)
        chmod(dir.appendingPathComponent("data").path, 0o777)
        func start(_ limit: Int, _ log: String) throws -> ChildProcess {
            let socket = dir.appendingPathComponent("w\(limit).sock").path
            // A user id of its own: the limit counts every process of the user, and other tests
            // run programs as nobody at the same time.
            return try ChildProcess(
                "/usr/bin/setpriv",
                [
                    "--reuid=64917", "--regid=64917", "--clear-groups", "/usr/bin/prlimit", "--nproc=\(limit)",
                    "\(binDirectory)/weather-fcgi", "--listen", socket, "--workers", "3",
                ],
                environment: Self.environment(dir), stderr: dir.appendingPathComponent(log).path)
        }
        func text(_ log: String) -> String { (try? String(contentsOfFile: dir.appendingPathComponent(log).path, encoding: .utf8)) ?? "" }

        // Room for no worker at all: an error status and a reason.
        let none = try start(1, "none.log")
        #expect(waitUntil { !none.isRunning })
        #expect(none.terminationStatus == 71, "\(text("none.log"))")
        #expect(text("none.log").contains("no worker could be started"))
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("w1.sock").path), "the socket file is not left behind")

        // Room for one: it serves, and the rest are said to be missing.
        let some = try start(2, "some.log")
        defer { some.stop() }
        let socket = dir.appendingPathComponent("w2.sock").path
        #expect(waitUntil { Self.health(socket) == "Status: 200 OK" })
        #expect(waitUntil { text("some.log").contains("cannot start a worker") }, "\(text("some.log"))")
        #expect(some.isRunning)
    }

    /// A peer on the socket that speaks FastCGI by hand: `silent` connects and sends nothing;
    /// `head` sends a BEGIN_REQUEST and 3 bytes of a PARAMS header, then nothing;
    /// `head-then-trickle` does the same, then after 1.5 s one byte every 0.3 s; `trickle` sends a
    /// whole health request, reads the answer to its end, then one byte every 0.3 s. Each keeps
    /// its connection open until stopped. `keep PORT` times requests on one kept TCP connection.
    static let peer = #"""
        import socket, struct, sys, time
        def record(kind, body):
            return struct.pack(">BBHHBB", 1, kind, 1, len(body), 0, 0) + body
        def params(uri):
            return b"".join(bytes([len(k), len(v)]) + k + v for k, v in [(b"REQUEST_METHOD", b"GET"), (b"REQUEST_URI", uri), (b"REMOTE_ADDR", b"127.0.0.1")])
        mode, target = sys.argv[1], sys.argv[2]
        if mode == "keep":
            # Five requests for /openapi.json on one kept connection (FCGI_KEEP_CONN) over TCP;
            # prints the median time of the last four, in milliseconds.
            s = socket.create_connection(("127.0.0.1", int(target)))
            times = []
            for _ in range(5):
                started = time.monotonic()
                s.sendall(record(1, struct.pack(">HB5x", 1, 1)) + record(4, params(b"/openapi.json")) + record(4, b"") + record(5, b""))
                got = b""
                while b"\x01\x03\x00\x01\x00\x08" not in got:  # FCGI_END_REQUEST, 8-byte body
                    got += s.recv(65536)
                times.append((time.monotonic() - started) * 1000)
            print(sorted(times[1:])[2], flush=True)
            sys.exit(0)
        s = socket.socket(socket.AF_UNIX); s.connect(target)
        begin = record(1, struct.pack(">HB5x", 1, 0))
        if mode == "head":
            s.sendall(begin + b"\x01\x04\x00")
        elif mode == "head-then-trickle":
            s.sendall(begin + b"\x01\x04\x00")
            time.sleep(1.5)  # past the head timeout: the worker closes; then bytes keep coming
            while True:
                try:
                    s.send(b"x")
                except OSError:
                    break
                time.sleep(0.3)
        elif mode == "trickle":
            s.sendall(begin + record(4, params(b"/v1/health")) + record(4, b"") + record(5, b""))
            got = b""
            while b"\x01\x03\x00\x01" not in got:  # FCGI_END_REQUEST
                got += s.recv(65536)
            print("answered", flush=True)
            while True:
                s.send(b"x"); time.sleep(0.3)
        time.sleep(60)  # "silent" too: connected, nothing sent
        """#

    /// `peer` in `mode` against `target` (a socket path, or a port for `keep`).
    static func startPeer(_ mode: String, _ target: String, stdout: String? = nil) throws -> ChildProcess {
        try ChildProcess("/usr/bin/python3", ["-c", peer, mode, target], environment: [:], stdout: stdout)
    }

    /// A connection that stops half-way through its head costs the worker `WEATHER_BODY_TIMEOUT`,
    /// not the connection's lifetime: libfcgi read heads with no timeout, so a peer with access to
    /// the socket held a worker as long as it liked (one worker here: the next request waited).
    @Test func aHeadThatStopsHalfWayReleasesTheWorkerAfterTheTimeout() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, socket) = try Self.worker(in: dir, env: ["WEATHER_BODY_TIMEOUT": "1"])
        defer { app.stop() }
        let peer = try Self.startPeer("head", socket)
        defer { peer.stop() }
        usleep(200_000)  // the worker is reading the peer's head
        #expect(Self.health(socket, within: 5) == "Status: 200 OK")
        #expect(peer.isRunning, "the peer still holds its connection open")
    }

    /// A peer whose head timed out, and which then keeps sending a byte now and then, is closed on
    /// at once: libfcgi closed such a connection itself, reading until the peer stopped (2 s a
    /// read), which held the worker for good.
    @Test func aPeerWhoseHeadTimedOutAndThenTricklesIsClosedOnAtOnce() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, socket) = try Self.worker(in: dir, env: ["WEATHER_BODY_TIMEOUT": "1"])
        defer { app.stop() }
        let peer = try Self.startPeer("head-then-trickle", socket)
        defer { peer.stop() }
        usleep(200_000)  // the worker is reading the peer's head
        #expect(Self.health(socket, within: 6) == "Status: 200 OK")
    }

    /// A peer that keeps sending after its answer is closed on within a second: libfcgi's close
    /// read until the peer stopped, waiting up to 2 s for each read, so a byte every 0.3 s held
    /// the worker for good.
    @Test func aPeerThatKeepsSendingAfterItsAnswerIsClosedOnInBoundedTime() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, socket) = try Self.worker(in: dir)
        defer { app.stop() }
        let output = dir.appendingPathComponent("peer.out").path
        let peer = try Self.startPeer("trickle", socket, stdout: output)
        defer { peer.stop() }
        #expect(waitUntil { ((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").contains("answered") })
        #expect(Self.health(socket, within: 5) == "Status: 200 OK")
    }

    /// Under `ulimit -n 8` a worker started, then failed every `accept` (EMFILE) while the web
    /// server waited out its timeout (an operations audit). A soft limit below what a worker
    /// needs is raised towards the hard one; a hard limit below it stops the start (71, saying
    /// so, no socket left). And the files it creates are for its user and group alone, whatever
    /// umask it came with (a shell's 022 made the database 0644).
    @Test func aWorkerShortOfDescriptorsRaisesItsLimitOrRefusesToStart() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("w.sock").path
        let refused = ChildProcessOutput.runData(
            "/bin/bash", ["-c", "ulimit -n 16; exec /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi --listen \(socket) 2>&1"],
            environment: Self.environment(dir))
        let said = String(decoding: refused.stdout, as: UTF8.self)
        #expect(refused.status == 71, "\(said)")
        #expect(said.contains("the open-file limit is 16") && said.contains("needs at least 32"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: socket))

        let app = try ChildProcess(
            "/bin/bash", ["-c", "ulimit -S -n 16; umask 022; exec \(binDirectory)/weather-fcgi --listen \(socket)"],
            environment: Self.environment(dir))
        defer { app.stop() }
        #expect(waitUntil { Self.health(socket) == "Status: 200 OK" }, "a raised limit serves")
        let limits = (try? String(contentsOfFile: "/proc/\(app.pid)/limits", encoding: .utf8)) ?? ""
        let files = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }.map { $0.split(separator: " ", omittingEmptySubsequences: true) }
        #expect(files.map { Int($0[3]) ?? 0 } ?? 0 >= 32, "\(limits)")
        for suffix in ["", "-wal", "-shm", "-writer"] {
            var st = stat()
            let path = dir.appendingPathComponent("data/weather.sqlite3\(suffix)").path
            #expect(stat(path, &st) == 0 && st.st_mode & 0o007 == 0, "\(path) is \(String(st.st_mode & 0o777, radix: 8))")
        }
    }

    /// A hang-up (the terminal of a start by hand closing) stops the supervisor and its workers as
    /// SIGTERM does, status 0; it killed them outright, without writing what they counted. Under
    /// `nohup` (SIGHUP ignored) it changes nothing.
    @Test func aHangUpStopsGracefullyUnlessIgnored() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let socket = dir.appendingPathComponent("w.sock").path
        let app = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", socket, "--workers", "2"], environment: Self.environment(dir))
        defer { app.stop() }
        #expect(waitUntil { Self.health(socket) == "Status: 200 OK" && workerPids(app.pid).count == 2 })
        let workers = workerPids(app.pid)
        kill(app.pid, SIGHUP)
        #expect(waitUntil(timeout: 5) { !app.isRunning })
        #expect(app.terminationStatus == 0)
        #expect(workers.allSatisfy { kill($0, 0) != 0 }, "no worker outlives the supervisor")

        let ignoring = "import os, signal, sys\nsignal.signal(signal.SIGHUP, signal.SIG_IGN)\nos.execv(sys.argv[1], sys.argv[1:])"
        let other = dir.appendingPathComponent("n.sock").path
        let nohup = try ChildProcess(
            "/usr/bin/python3", ["-c", ignoring, "\(binDirectory)/weather-fcgi", "--listen", other, "--workers", "2"],
            environment: Self.environment(dir))
        defer { nohup.stop() }
        #expect(waitUntil { Self.health(other) == "Status: 200 OK" })
        kill(nohup.pid, SIGHUP)
        // The stop above took about 0.1 s: a second is ample for one that should not happen.
        #expect(!waitUntil(timeout: 1) { !nohup.isRunning }, "SIGHUP stopped a supervisor that came with it ignored")
        #expect(Self.health(other) == "Status: 200 OK")
    }

    /// A connection that sends nothing costs a worker 2 s, as libfcgi's own accept allowed on a
    /// Unix socket, not the head timeout (10 s by default).
    @Test func aSilentConnectionIsDroppedAfterTwoSeconds() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let (app, socket) = try Self.worker(in: dir)
        defer { app.stop() }
        let peer = try Self.startPeer("silent", socket)
        defer { peer.stop() }
        usleep(200_000)  // the worker has taken the silent connection
        #expect(Self.health(socket, within: 5) == "Status: 200 OK")
    }

    /// Over TCP, what libfcgi's accept did: no Nagle delay (the last small write of a response on
    /// a kept connection waited ~40 ms for a delayed ACK), and `FCGI_WEB_SERVER_ADDRS` decides
    /// who may connect.
    @Test func tcpConnectionsAreSentWithoutDelayAndFromAllowedAddressesOnly() throws {
        let dir = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let port = freePort()
        let app = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", "127.0.0.1:\(port)"], environment: Self.environment(dir))
        defer { app.stop() }
        #expect(waitUntil { Self.health("127.0.0.1:\(port)") == "Status: 200 OK" })
        let output = dir.appendingPathComponent("keep.out").path
        let peer = try Self.startPeer("keep", "\(port)", stdout: output)
        defer { peer.stop() }
        #expect(waitUntil { !peer.isRunning })
        let median = Double(((try? String(contentsOfFile: output, encoding: .utf8)) ?? "").trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(median.map { $0 < 20 } == true, "median \(median.map { "\($0) ms" } ?? "missing") for a kept connection's /openapi.json (~40 ms with Nagle)")

        var only = Self.environment(dir)
        only["FCGI_WEB_SERVER_ADDRS"] = "192.0.2.7, 127.0.0.1"
        let otherPort = freePort()
        let allowed = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", "127.0.0.1:\(otherPort)"], environment: only)
        defer { allowed.stop() }
        #expect(waitUntil { Self.health("127.0.0.1:\(otherPort)") == "Status: 200 OK" })
        only["FCGI_WEB_SERVER_ADDRS"] = "192.0.2.7"
        let thirdPort = freePort()
        let refused = try ChildProcess("\(binDirectory)/weather-fcgi", ["--listen", "127.0.0.1:\(thirdPort)"], environment: only)
        defer { refused.stop() }
        #expect(waitUntil { Self.tcpListeners(port: thirdPort) == ["0100007F:\(String(format: "%04X", thirdPort))"] })
        #expect(Self.health("127.0.0.1:\(thirdPort)", within: 3) == "", "a peer not in FCGI_WEB_SERVER_ADDRS is answered")
        #expect(refused.isRunning)
    }
}
