import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The repository root, found from this file's path.
let repositoryRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0..<4 { url.deleteLastPathComponent() }
    return url
}()

/// Where `swift build` put the executables (`make test` passes it; else the debug folder).
let binDirectory: String =
    ProcessInfo.processInfo.environment["CW_BIN_DIR"]
    ?? repositoryRoot.appendingPathComponent(".build/debug").path

/// A free loopback TCP port for a server a test starts (nginx, Apache), checked by binding it.
///
/// Taken from below the kernel's ephemeral range (`ip_local_port_range`), not by binding port 0:
/// a port from that range can be handed, between this check and the server's own bind, to the
/// local end of any outgoing connection, and the soak tests running beside make thousands of them
/// (a fresh-clone CI run once failed with "nginx never answered" that way).
func freePort() -> Int {
    let range =
        (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
        .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) } ?? []
    let ephemeralLow = range.first ?? 32768
    let low = 10_000, high = max(low + 1000, ephemeralLow - 1)
    for _ in 0..<200 {
        let candidate = Int.random(in: low...high)
        if canBind(candidate) { return candidate }
    }
    preconditionFailure("no free port below \(ephemeralLow)")
}

/// Whether a listening socket could bind 127.0.0.1:`port` right now.
private func canBind(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var yes: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))  // as nginx does
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

/// Starts a process with posix_spawn and remembers its pid so the test can stop exactly it.
///
/// Not Foundation's `Process`: on Linux it starts children with SIGTERM blocked, so servers that
/// do not unblock it themselves (Apache, nginx) could only be killed, and their workers orphaned.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let name: String
    private var exitStatus: Int32?

    /// `stdin`: a descriptor to give the child as its fd 0 (a listening socket, as systemd and
    /// spawn-fcgi pass one); `/dev/null` otherwise.
    init(_ executable: String, _ arguments: [String], environment: [String: String], stdout: String? = nil, stderr: String? = nil, stdin: Int32? = nil) throws {
        name = (executable as NSString).lastPathComponent
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // Never inherit the test runner's pipes: a server outliving a test would keep them open and
        // the runner would wait for end-of-file forever.
        if let stdin {
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_addopen(&actions, 1, stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        // Nor anything else the test process has open without close-on-exec (its HTTP clients'
        // sockets, a test's listener or pipe): tests run in parallel, and a server started by one
        // would hold another's descriptors for as long as it runs.
        Self.closeFrom3?(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigmask(&attributes, &empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for s in [SIGTERM, SIGINT, SIGPIPE, SIGCHLD, SIGHUP, SIGUSR1] { sigaddset(&defaults, s) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        // Its own process group: Apache stops by signalling its whole group, which must not
        // include the test runner.
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var child: pid_t = 0
        let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard rc == 0 else { throw ClientError("cannot start \(executable): \(String(cString: strerror(rc)))") }
        pid = child
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not declare.
    static let closeFrom3: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
    }()

    var isRunning: Bool {
        if exitStatus != nil { return false }
        var status: Int32 = 0
        let r = waitpid(pid, &status, WNOHANG)
        if r == pid { exitStatus = status; return false }
        return r == 0
    }

    /// The exit code, once it has exited normally (`-signal` when a signal ended it).
    var terminationStatus: Int32 {
        guard let s = exitStatus else { return -1 }
        return (s & 0x7f) == 0 ? (s >> 8) & 0xff : -(s & 0x7f)
    }

    /// A process its owner never stopped (an initialiser that threw after starting it, say) is
    /// stopped when the last reference to it goes: no server outlives the test that started it.
    /// (Two fake providers outlived a run in session 11.)
    deinit { stop(grace: 2) }

    /// SIGTERM, then SIGKILL if it has not gone within `grace` seconds; always reaped. Then, once,
    /// SIGKILL to its process group (its own, see init), whether it went by itself or not: a
    /// supervisor, nginx, Apache or mod_fcgid that ignored the SIGTERM, or that ended before
    /// (killed by a test) or without its children, leaves no workers behind holding sockets.
    func stop(grace: Double = 5) {
        guard !groupCleared else { return }
        groupCleared = true
        if isRunning {
            kill(pid, SIGTERM)
            let deadline = Date().addingTimeInterval(grace)
            while isRunning && Date() < deadline { usleep(10_000) }
        }
        kill(-pid, SIGKILL)
        while isRunning { usleep(10_000) }
    }

    private var groupCleared = false
}

/// Polls `condition` every 20 ms until it holds or `timeout` passes.
func waitUntil(timeout: Double = 10, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}

/// The real `weather-fcgi` behind a real nginx built from `deploy/nginx/closet-weather.conf`, on a
/// private port and database. Everything it starts is stopped by pid in `stop()`.
final class GatewayHarness {
    let directory: URL
    let port: Int
    let socketPath: String
    let databasePath: String
    let environment: [String: String]
    private(set) var app: ChildProcess?
    private var nginx: ChildProcess?
    /// Things that must live as long as the gateway (e.g. the fake providers it calls).
    var companions: [AnyObject] = []

    /// `env` adds configuration (e.g. short TTLs, provider base URLs).
    init(workers: Int = 2, env: [String: String] = [:], startNginx: Bool = true) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-e2e-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("data"), withIntermediateDirectories: true)
        port = freePort()
        socketPath = directory.appendingPathComponent("weather.sock").path
        databasePath = directory.appendingPathComponent("data/weather.sqlite3").path
        var e = [
            "WEATHER_DB_PATH": databasePath, "PATH": "/usr/sbin:/usr/bin:/bin", "WEATHER_FLUSH_INTERVAL": "0",
            "CW_TEST_CLOCK_OFFSET_FILE": directory.appendingPathComponent("clock-offset").path,
        ]
        e.merge(env) { $1 }
        environment = e
        try startApp(workers: workers)
        if startNginx { try startWebServer() }
    }

    func startApp(workers: Int) throws {
        app = try ChildProcess(
            "\(binDirectory)/weather-fcgi", ["--listen", socketPath, "--socket-mode", "0666", "--workers", "\(workers)"],
            environment: environment, stderr: directory.appendingPathComponent("app.log").path)
        guard waitUntil({ FileManager.default.fileExists(atPath: socketPath) }) else { throw ClientError("socket never appeared; log: \(log)") }
    }

    func stopApp() {
        app?.stop()
        app = nil
    }

    private func startWebServer() throws {
        let nginxDir = directory.appendingPathComponent("nginx").path
        let script = ChildProcessOutput.run(
            "/bin/bash", [repositoryRoot.appendingPathComponent("scripts/nginx-conf.sh").path, "\(port)", socketPath, nginxDir])
        let conf = script.trimmingCharacters(in: .whitespacesAndNewlines)
        nginx = try ChildProcess("/usr/sbin/nginx", ["-c", conf], environment: [:], stderr: directory.appendingPathComponent("nginx.stderr").path)
        guard waitUntil({ (try? HTTPClient.send(port: port, "GET", "/v1/health", timeout: 2)) != nil }) else {
            throw ClientError("nginx never answered on \(port)")
        }
    }

    /// Seconds `advanceClock` has moved the gateway's wall clock so far.
    private(set) var clockOffset = 0

    /// Moves the wall clock of the gateway's processes `seconds` forward, for the next request on:
    /// what a token's expiry, a cache TTL or a `Retry-After` is timed by, without waiting for it
    /// (`CW_TEST_CLOCK_OFFSET_FILE`, which debug builds read: Sources/WeatherCore/Time/SystemClock.swift).
    /// Written whole by a rename, so no worker reads half a number.
    func advanceClock(by seconds: Int) throws {
        clockOffset += seconds
        let file = directory.appendingPathComponent("clock-offset")
        let next = directory.appendingPathComponent("clock-offset.next")
        try Data("\(clockOffset)\n".utf8).write(to: next)
        guard rename(next.path, file.path) == 0 else { throw ClientError("cannot move the gateway's clock: \(String(cString: strerror(errno)))") }
    }

    /// The worker log (one line per request).
    var log: String { (try? String(contentsOf: directory.appendingPathComponent("app.log"), encoding: .utf8)) ?? "" }

    func request(_ method: String, _ path: String, headers: [String: String] = [:], json: Any? = nil) throws -> HTTPResponse {
        var h = headers
        var body: [UInt8]?
        if let json {
            body = Array(try JSONSerialization.data(withJSONObject: json))
            if h["Content-Type"] == nil { h["Content-Type"] = "application/json" }
        }
        return try HTTPClient.send(port: port, method, path, headers: h, body: body)
    }

    /// A new session for a random installation id; returns the token response.
    func createSession(installationId: String = UUID().uuidString, headers: [String: String] = [:]) throws -> [String: Any] {
        let r = try request("POST", "/v1/weather/session", headers: headers, json: ["platform": "ios", "appVersion": "1.0", "installationId": installationId])
        guard r.status == 201 else { throw ClientError("create session: \(r.status) \(r.text)") }
        return r.json
    }

    /// Runs `sqlite3` on the test database (read-only questions).
    /// The `sqlite3` shell's answer to `query`, waiting up to 5 s for a lock the workers hold (the
    /// shell waits for none by default: under ThreadSanitizer's pace, four workers starting at
    /// once held one when `PRAGMA journal_mode` asked, and the answer was empty).
    func sql(_ query: String) -> String {
        ChildProcessOutput.run("/usr/bin/sqlite3", ["-cmd", ".timeout 5000", databasePath, query]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        nginx?.stop()
        nginx = nil
        stopApp()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

enum ChildProcessOutput {
    /// Runs a command to completion and returns its standard output.
    static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: Data? = nil) -> String {
        String(decoding: runData(executable, arguments, environment: environment, stdin: stdin).stdout, as: UTF8.self)
    }

    static func runData(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: Data? = nil) -> (stdout: Data, status: Int32)
    {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if let environment { p.environment = environment }
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        let input = Pipe()
        p.standardInput = input
        do { try p.run() } catch { return (Data(), -1) }
        // The throwing write: a child that exits before reading makes it EPIPE, which
        // `write(_:)` turns into a crash of the whole test process (a fresh-clone CI run).
        if let stdin { try? input.fileHandleForWriting.write(contentsOf: stdin) }
        try? input.fileHandleForWriting.close()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (data, p.terminationStatus)
    }
}

extension GatewayHarness {
    /// The supervisor is still up (no worker crash took it down).
    var isAppRunning: Bool { app?.isRunning == true }
}

/// The migration files in the repository, in order: what a new database must record.
var migrationFileNames: [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("migrations").path)) ?? [])
        .filter { $0.hasSuffix(".sql") }.sorted()
}
