import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A worker that has gone quiet still does its deferred work (counters, session touches, limit
/// leases): it wakes after `WEATHER_FLUSH_INTERVAL` seconds without a request. The wait is the
/// kernel's `accept` timeout on the listening socket, so these tests wait in real time (about a
/// second), polling for the outcome rather than sleeping a fixed time.
@Suite struct IdleWorkerTests {
    @Test func aQuietWorkerWritesWhatItCountedWithoutAnotherRequest() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_FLUSH_INTERVAL": "1"])
        for _ in 0..<3 { _ = try h.createSession() }
        let lines = h.log.split(separator: "\n").count
        // No request after these three: only the worker's own wake-up can write their counters.
        var seen = ""
        let written = waitUntil(timeout: 6) {
            seen = h.sql("SELECT coalesce(sum(value), 0) FROM weather_counters WHERE name = 'sessions.created'")
            return seen == "3"
        }
        #expect(written, "sessions.created = \(seen) six seconds after the last request")
        #expect(h.log.split(separator: "\n").count == lines, "no request was made meanwhile")
    }

    /// Over TCP, accepted connections inherit the listener's receive timeout; the worker replaces
    /// it with its body timeout (10 s), so a body that reaches the worker later than the flush
    /// interval is still read.
    @Test func overTCPABodyArrivingAfterTheIdleTimeoutIsStillRead() throws {
        let worker = try TCPWorker(["WEATHER_FLUSH_INTERVAL": "1"])
        defer { worker.stop() }
        let port = worker.port, app = worker.app

        let answer = FastCGIExchange.firstCreation(port: port)
        #expect(answer.hasPrefix("Status: 201"), "\(answer.prefix(200))")

        // Idle past the timeout at least once, then a request whose body comes 1.5 s after its head.
        let late = try FastCGIExchange.creation(port: port, pauseBeforeBody: 1.5)
        #expect(late.hasPrefix("Status: 201"), "\(late.prefix(200))")
        #expect(app.isRunning)
    }
}

extension IdleWorkerTests {
    /// A web server that stops sending in the middle of a body (one that passes bodies on as they
    /// come, unbuffered) costs that request a 400 after `WEATHER_BODY_TIMEOUT`, not the worker:
    /// it used to wait for as long as the connection stayed open, serving nobody else.
    @Test func aBodyThatStopsComingIsRefusedAfterTheBodyTimeout() throws {
        let worker = try TCPWorker(["WEATHER_BODY_TIMEOUT": "1"])
        defer { worker.stop() }
        let port = worker.port, app = worker.app
        #expect(FastCGIExchange.firstCreation(port: port).hasPrefix("Status: 201"))

        let started = Date()
        let stalled = try FastCGIExchange.stalledCreation(port: port, sent: 10)
        let waited = Date().timeIntervalSince(started)
        #expect(stalled.hasPrefix("Status: 400"), "\(stalled.prefix(200))")
        #expect(waited >= 0.9 && waited < 3, "answered after \(waited) s")
        #expect(try FastCGIExchange.creation(port: port, pauseBeforeBody: 0).hasPrefix("Status: 201"))
        #expect(app.isRunning)
    }

    /// A peer on the socket that asks for answers and never reads them (a stalled web server;
    /// anything else that can reach the socket) costs the worker at most `WEATHER_BODY_TIMEOUT`
    /// per wait: the worker's write used to block for as long as the connection stayed open, and
    /// nginx's requests meanwhile found no worker. Here `/openapi.json` (71 KB) on one kept
    /// connection until the socket's buffer is full.
    @Test func aPeerThatStopsReadingHoldsTheWorkerNoLongerThanTheBodyTimeout() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_BODY_TIMEOUT": "1"])
        let peer = try RawPeer(h.socketPath)
        let pairs = FastCGIExchange.params(["REQUEST_METHOD": "GET", "REQUEST_URI": "/openapi.json", "REMOTE_ADDR": "127.0.0.1"])
        // FCGI_BEGIN_REQUEST as a responder with FCGI_KEEP_CONN, the params, no body; one at a
        // time, each after the worker has had time to answer the one before.
        let request =
            FastCGIExchange.record(1, [0, 1, 1, 0, 0, 0, 0, 0]) + FastCGIExchange.record(4, pairs) + FastCGIExchange.record(4, [])
            + FastCGIExchange.record(5, [])
        for _ in 0..<6 {
            try peer.send(request)
            usleep(100_000)
        }
        let started = Date()
        // The stalled peer's connection stays open until health has answered (an unused `peer`
        // could be released, and its socket closed, before the request).
        let health = try withExtendedLifetime(peer) { try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 8) }
        let waited = Date().timeIntervalSince(started)
        #expect(health.status == 200, "\(health.status) \(health.text)")
        #expect(waited < 3, "health answered after \(waited) s")
    }

    /// Plain CGI: the body is read for at most `WEATHER_BODY_TIMEOUT` in all, then answered 400.
    @Test func aCGIBodyThatStopsComingIsRefusedAfterTheBodyTimeout() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-cgibody-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // Ten bytes of a 60-byte body, then the pipe stays open for 2.5 s more.
        let script = #"(printf '{"platfor'; sleep 2.5) | { s=$(date +%s%N); "$0"; echo; echo "elapsed_ms=$(( ($(date +%s%N) - s) / 1000000 ))"; }"#
        let out = ChildProcessOutput.run(
            "/bin/bash", ["-c", script, "\(binDirectory)/weather-fcgi"],
            environment: [
                "PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": directory.appendingPathComponent("w.sqlite3").path, "WEATHER_BODY_TIMEOUT": "1",
                "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "60",
                "REMOTE_ADDR": "192.0.2.1",
            ])
        #expect(out.hasPrefix("Status: 400"), "\(out.prefix(300))")
        let elapsed = out.split(separator: "\n").last.flatMap { $0.hasPrefix("elapsed_ms=") ? Int($0.dropFirst(11)) : nil }
        #expect(elapsed.map { $0 >= 900 && $0 < 2_000 } == true, "\(out.suffix(40))")
    }

    /// A plain CGI run whose standard input and output are one socket, as mod_cgid's are: a body
    /// refused for its size (413 after reading 4096 of 5,000 bytes) is read to its end before the
    /// program exits. It exited with the rest unread, the kernel reset the socket, and the answer
    /// already written was lost: Apache dropped the client's connection (now and then through
    /// Apache; here every time, since this reads only after the program has ended).
    @Test func aCGIBodyRefusedForItsSizeIsReadToItsEndSoTheAnswerArrives() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-cgidrain-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        for _ in 0..<3 {
            var pair: [Int32] = [-1, -1]
            #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
            let ours = pair[0]
            defer { close(ours) }
            let program = Process()
            program.executableURL = URL(fileURLWithPath: "\(binDirectory)/weather-fcgi")
            program.environment = [
                "PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": directory.appendingPathComponent("w.sqlite3").path,
                "GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session",
                "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "5000", "REMOTE_ADDR": "192.0.2.1",
            ]
            let theirs = FileHandle(fileDescriptor: pair[1], closeOnDealloc: true)
            program.standardInput = theirs
            program.standardOutput = theirs
            program.standardError = FileHandle.nullDevice
            try program.run()
            try theirs.close()
            let body = [UInt8](repeating: 32, count: 5000)
            #expect(body.withUnsafeBytes { send(ours, $0.baseAddress, 5000, Int32(MSG_NOSIGNAL)) } == 5000)
            program.waitUntilExit()
            var answer: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            var failure: Int32 = 0
            while true {
                let n = buffer.withUnsafeMutableBytes { recv(ours, $0.baseAddress, 65536, 0) }
                if n < 0 { failure = errno; break }
                if n == 0 { break }
                answer += buffer.prefix(n)
            }
            #expect(failure == 0, "the answer was lost: \(String(cString: strerror(failure)))")
            #expect(String(decoding: answer, as: UTF8.self).hasPrefix("Status: 413"), "\(String(decoding: answer.prefix(200), as: UTF8.self))")
        }
    }

    /// Workers on one socket may start with different intervals (a settings file changed between
    /// restarts): the socket keeps the shortest any of them wants. It kept the last one set, so a
    /// worker lost its wake-up to a sibling started later with a longer interval, or with none.
    /// A supervisor (`--workers 2`) starts before any of its workers and clears what an earlier
    /// start left (a systemd socket outlives the service), so its workers' own interval applies.
    @Test func theSocketKeepsTheShortestIntervalAnyWorkerWants() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-short-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // (timeout already on the socket, the worker's WEATHER_FLUSH_INTERVAL, workers, the timeout after)
        for (left, interval, workers, kept) in [(10, "1", 1, 1), (1, "10", 1, 1), (1, "0", 1, 1), (0, "5", 1, 5), (1, "10", 2, 10), (1, "0", 2, 0)] {
            let port = freePort()
            let listener = try #require(FastCGIExchange.listening(port: port))
            defer { close(listener) }
            var before = timeval(tv_sec: left, tv_usec: 0)  // a sibling's, or an earlier start's
            setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &before, socklen_t(MemoryLayout<timeval>.size))

            let app = try ChildProcess(
                "\(binDirectory)/weather-fcgi", workers > 1 ? ["--workers", "\(workers)"] : [],
                environment: ["WEATHER_DB_PATH": directory.appendingPathComponent("w\(port).sqlite3").path, "WEATHER_FLUSH_INTERVAL": interval],
                stderr: directory.appendingPathComponent("app.log").path, stdin: listener)
            defer { app.stop() }
            // Answering means it has set up its socket.
            #expect(FastCGIExchange.firstCreation(port: port).hasPrefix("Status: 201"))
            var after = timeval()
            var length = socklen_t(MemoryLayout<timeval>.size)
            #expect(getsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &after, &length) == 0)
            #expect(after.tv_sec == kept && after.tv_usec == 0, "timeout \(left) s, \(workers) worker(s) with \(interval) s: \(after.tv_sec) s")
        }
    }

    /// With a receive timeout on its socket, Linux does not restart an `accept` interrupted by a
    /// signal, even SIGSTOP/SIGCONT (a cgroup freeze, a debugger attaching): the worker must carry
    /// on. It exited with status 0 before.
    @Test func anIdleWorkerSurvivesBeingStoppedAndContinued() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_FLUSH_INTERVAL": "10"])
        let worker = try #require(h.app)
        #expect(try h.request("GET", "/v1/health").status == 200)
        usleep(100_000)  // the worker is back in accept
        kill(worker.pid, SIGSTOP)
        usleep(100_000)
        kill(worker.pid, SIGCONT)
        usleep(200_000)
        #expect(worker.isRunning, "the worker exited after SIGSTOP/SIGCONT")
        #expect(try h.request("GET", "/v1/health").status == 200)
    }

    /// The socket outlives the worker (systemd keeps it across restarts): a timeout left on it by
    /// an earlier start must not end a worker started with `WEATHER_FLUSH_INTERVAL=0`.
    @Test func aTimeoutLeftOnAKeptSocketDoesNotEndAWorkerWithoutOne() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-kept-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let socketPath = directory.appendingPathComponent("kept.sock").path
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = FastCGIExchange.unixAddress(socketPath)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 16) == 0)
        // What an earlier start with WEATHER_FLUSH_INTERVAL=1 leaves behind.
        var leftover = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &leftover, socklen_t(MemoryLayout<timeval>.size))

        let app = try ChildProcess(
            "\(binDirectory)/weather-fcgi", [],
            environment: ["WEATHER_DB_PATH": directory.appendingPathComponent("w.sqlite3").path, "WEATHER_FLUSH_INTERVAL": "0"],
            stderr: directory.appendingPathComponent("app.log").path, stdin: listener)
        defer { app.stop() }
        let ended = waitUntil(timeout: 2.5) { !app.isRunning }
        #expect(!ended, "the worker ended while idle on the kept socket")
    }
}

extension IdleWorkerTests {
    /// Workers on one socket may run with different settings; a sibling may set the socket's
    /// timeout. A worker with `WEATHER_FLUSH_INTERVAL=0` that meets a sibling's timeout must wait
    /// on (it exited), and over TCP clear what its connections inherit.
    @Test func aWorkerWithoutATimeoutCarriesOnWhenASiblingSetsOne() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-sib-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let port = freePort()
        let listener = try #require(FastCGIExchange.listening(port: port))
        defer { close(listener) }

        let app = try ChildProcess(
            "\(binDirectory)/weather-fcgi", [],
            environment: ["WEATHER_DB_PATH": directory.appendingPathComponent("w.sqlite3").path, "WEATHER_FLUSH_INTERVAL": "0"],
            stderr: directory.appendingPathComponent("app.log").path, stdin: listener)
        defer { app.stop() }
        #expect(FastCGIExchange.firstCreation(port: port).hasPrefix("Status: 201"))

        // A sibling starting with WEATHER_FLUSH_INTERVAL=1 sets this on the shared socket.
        var sibling = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &sibling, socklen_t(MemoryLayout<timeval>.size))
        // The worker's next accept runs with it; its connection inherits it too.
        let late = try FastCGIExchange.creation(port: port, pauseBeforeBody: 1.5)
        #expect(late.hasPrefix("Status: 201"), "\(late.prefix(200))")
        let ended = waitUntil(timeout: 2.5) { !app.isRunning }
        #expect(!ended, "the worker ended on its sibling's timeout")
    }
}

/// `weather-fcgi --workers 1` on a fresh database in a scratch folder, listening on a free
/// loopback TCP port, with `settings` in its environment.
final class TCPWorker {
    let directory: URL
    let port = freePort()
    let app: ChildProcess

    init(_ settings: [String: String]) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-tcp-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        app = try ChildProcess(
            "\(binDirectory)/weather-fcgi", ["--listen", "127.0.0.1:\(port)", "--workers", "1"],
            environment: settings.merging(["WEATHER_DB_PATH": directory.appendingPathComponent("w.sqlite3").path]) { $1 },
            stderr: directory.appendingPathComponent("app.log").path)
    }

    func stop() {
        app.stop()
        try? FileManager.default.removeItem(at: directory)
    }
}

/// Just enough of the FastCGI protocol to send one responder request to a worker directly (no web
/// server in between, so the test decides when the body arrives) and read its STDOUT.
enum FastCGIExchange {
    /// A session creation (a new installation id each time), its body `pauseBeforeBody` seconds
    /// after its head.
    static func creation(port: Int, pauseBeforeBody: Double) throws -> String {
        let body = Array("{\"platform\":\"ios\",\"appVersion\":\"1.0\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let params = [
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "\(body.count)",
        ]
        return try run(port: port, params: params, body: body, pauseBeforeBody: pauseBeforeBody)
    }

    /// The first creation answered by a worker that is starting: tried until it answers (10 s).
    static func firstCreation(port: Int) -> String {
        var answer = ""
        _ = waitUntil(timeout: 10) {
            answer = (try? creation(port: port, pauseBeforeBody: 0)) ?? ""
            return !answer.isEmpty
        }
        return answer
    }

    /// 127.0.0.1:`port`.
    /// A TCP socket listening on 127.0.0.1:`port`, as a process manager hands one to its
    /// workers; nil when it cannot be had. The caller closes it.
    static func listening(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var yes: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, 16) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }

    static func loopback(_ port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        return address
    }

    static func record(_ type: UInt8, _ content: [UInt8]) -> [UInt8] {
        [1, type, 0, 1, UInt8(content.count >> 8), UInt8(content.count & 0xFF), 0, 0] + content
    }

    /// FastCGI name-value pairs, the content of `FCGI_PARAMS` records.
    static func params(_ pairs: [String: String]) -> [UInt8] {
        pairs.flatMap { name, value in length(name.utf8.count) + length(value.utf8.count) + Array(name.utf8) + Array(value.utf8) }
    }

    /// The address of the Unix socket at `path`.
    static func unixAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.enumerated() where i < raw.count - 1 { raw[i] = byte }
        }
        return address
    }

    static func length(_ n: Int) -> [UInt8] {
        n < 128 ? [UInt8(n)] : [UInt8((n >> 24) | 0x80), UInt8((n >> 16) & 0xFF), UInt8((n >> 8) & 0xFF), UInt8(n & 0xFF)]
    }

    /// A session creation whose body stops after `sent` of its bytes; the connection stays open.
    static func stalledCreation(port: Int, sent: Int) throws -> String {
        let body = Array("{\"platform\":\"ios\",\"appVersion\":\"1.0\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let params = [
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "\(body.count)",
        ]
        return try run(port: port, params: params, body: body, pauseBeforeBody: 0, stopAfter: sent)
    }

    static func run(port: Int, params: [String: String], body: [UInt8], pauseBeforeBody: Double, stopAfter: Int? = nil) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket failed") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var addr = loopback(port)
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw ClientError("connect failed") }

        let head = record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + record(4, Self.params(params)) + record(4, [])
        try send(fd, head)
        if pauseBeforeBody > 0 { usleep(UInt32(pauseBeforeBody * 1_000_000)) }
        if let stopAfter {
            // A STDIN record that announces the whole body and carries only its start.
            let announced = record(5, body)
            try send(fd, Array(announced.prefix(8 + stopAfter)))
        } else {
            try send(fd, record(5, body) + record(5, []))
        }

        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            received += buffer[0..<n]
        }
        // STDOUT records (type 6) in order, up to END_REQUEST (type 3).
        var stdout: [UInt8] = []
        var i = 0
        while i + 8 <= received.count {
            let type = received[i + 1]
            let count = Int(received[i + 4]) << 8 | Int(received[i + 5])
            let padding = Int(received[i + 6])
            guard i + 8 + count <= received.count else { break }
            if type == 6 { stdout += received[(i + 8)..<(i + 8 + count)] }
            if type == 3 { break }
            i += 8 + count + padding
        }
        return String(decoding: stdout, as: UTF8.self)
    }

    static func send(_ fd: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ClientError("send failed") }
            sent += n
        }
    }
}
