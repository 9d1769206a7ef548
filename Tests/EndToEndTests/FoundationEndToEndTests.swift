import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The real binary behind real nginx (2+ workers), in CGI mode, and through cgi-fcgi.
@Suite(.serialized) struct FoundationEndToEndTests {
    @Test func healthAndErrorEnvelopesThroughNginx() throws {
        let h = try GatewayHarness(workers: 2)
        let health = try h.request("GET", "/v1/health")
        #expect(health.status == 200)
        #expect(health.json["status"] as? String == "ok")
        #expect(health.headers["content-type"] == "application/json; charset=utf-8")
        #expect(health.headers["x-content-type-options"] == "nosniff")
        // The worker's own id: the shipped nginx site passes none (its `$request_id` cost a
        // quarter of nginx's instructions a request; session 29).
        let id = try #require(health.headers["x-request-id"])
        #expect(id.wholeMatch(of: /w[0-9]+-[0-9]+/) != nil, "\(id)")
        #expect(h.log.contains("request_id=\(id)"))

        let missing = try h.request("GET", "/v1/nothing-here")
        #expect(missing.status == 404)
        #expect(missing.errorCode == "not_found")
        let wrong = try h.request("DELETE", "/v1/weather/session")
        #expect(wrong.status == 405)
        #expect(wrong.headers["allow"] == "POST")
        #expect(wrong.errorCode == "method_not_allowed")
        #expect(wrong.headers["x-request-id"] != nil)
    }

    /// Runs the binary as plain CGI with `env` and returns its raw output.
    func cgi(_ env: [String: String], stdin: String = "", database: String) -> String {
        var e = env
        e["WEATHER_DB_PATH"] = database
        return ChildProcessOutput.run("\(binDirectory)/weather-fcgi", [], environment: e, stdin: Data(stdin.utf8))
    }

    /// One plain-CGI request to the binary on `database` (JSON `body` on standard input): its
    /// exit status and everything it wrote, the response and then its log lines.
    func cgiRequest(_ method: String, _ uri: String, body: String = "", database: String) -> (status: Int32, text: String) {
        let out = ChildProcessOutput.runData(
            "/bin/bash",
            [
                "-c",
                "REQUEST_METHOD=\(method) REQUEST_URI=\(uri) CONTENT_TYPE=application/json CONTENT_LENGTH=\(body.utf8.count) WEATHER_DB_PATH=\(database) /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi 2>&1 <<< '\(body)'",
            ])
        return (out.status, String(decoding: out.stdout, as: UTF8.self))
    }

    /// `GET /v1/health` under plain CGI: `before` runs first (a `cd`, or `env -i` to clear the
    /// environment), `settings` are shell assignments for the program; standard error is in the text.
    func cgiHealth(_ settings: String, before: String = "") -> (status: Int32, text: String) {
        let out = ChildProcessOutput.runData(
            "/bin/bash",
            ["-c", "\(before)REQUEST_METHOD=GET REQUEST_URI=/v1/health \(settings) /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi 2>&1 </dev/null"])
        return (out.status, String(decoding: out.stdout, as: UTF8.self))
    }

    /// Apache turns a CGI query string without `=` into arguments: under CGI the program ignores
    /// its arguments, so `?--listen+127.0.0.1:PORT` cannot start a FastCGI server for anyone.
    @Test func underCGITheArgumentsAreIgnored() throws {
        let h = try GatewayHarness(workers: 1, startNginx: false)
        let port = freePort()
        // Under `timeout`: a program that obeyed the arguments would serve until stopped.
        let out = ChildProcessOutput.run(
            "/usr/bin/timeout", ["10", "\(binDirectory)/weather-fcgi", "--listen", "127.0.0.1:\(port)", "--workers", "2"],
            environment: [
                "GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health",
                "WEATHER_DB_PATH": h.databasePath,
            ])
        #expect(out.hasPrefix("Status: 200 OK\r\n"), "\(out.prefix(200))")
        #expect(HTTPClientProbe.nothingListens(on: port))
    }

    @Test func plainCGIAndApacheStyleParametersRouteIdentically() throws {
        let h = try GatewayHarness(workers: 1, startNginx: false)
        let viaURI = cgi(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health"], database: h.databasePath)
        let viaPathInfo = cgi(["REQUEST_METHOD": "GET", "SCRIPT_NAME": "/weather.fcgi", "PATH_INFO": "/v1/health"], database: h.databasePath)
        let prefixed = cgi(["REQUEST_METHOD": "GET", "REQUEST_URI": "/api/v1/health", "WEATHER_MOUNT_PREFIX": "/api"], database: h.databasePath)
        for out in [viaURI, viaPathInfo, prefixed] {
            #expect(out.hasPrefix("Status: 200 OK\r\n"), "\(out)")
            #expect(out.contains("X-Content-Type-Options: nosniff"))
            #expect(out.contains("\"status\":\"ok\""))
        }
        let notFound = cgi(["REQUEST_METHOD": "GET", "SCRIPT_NAME": "/weather.fcgi", "PATH_INFO": "/v1/nope"], database: h.databasePath)
        #expect(notFound.hasPrefix("Status: 404"))

        // The same parameters over FastCGI, as Apache's mod_fcgid/mod_proxy_fcgi would send them.
        let fcgi = ChildProcessOutput.run(
            "/usr/bin/cgi-fcgi", ["-bind", "-connect", h.socketPath],
            environment: ["REQUEST_METHOD": "GET", "SCRIPT_NAME": "/closet/weather.fcgi", "PATH_INFO": "/v1/health", "WEATHER_MOUNT_PREFIX": "/closet"])
        #expect(fcgi.hasPrefix("Status: 200 OK"), "\(fcgi)")
        let sessionBody = #"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#
        let created = ChildProcessOutput.run(
            "/usr/bin/cgi-fcgi", ["-bind", "-connect", h.socketPath],
            environment: [
                "REQUEST_METHOD": "POST", "SCRIPT_NAME": "/weather.fcgi", "PATH_INFO": "/v1/weather/session", "CONTENT_TYPE": "application/json",
                "CONTENT_LENGTH": "\(sessionBody.utf8.count)", "REMOTE_ADDR": "192.0.2.1",
            ],
            stdin: Data(sessionBody.utf8))
        #expect(created.hasPrefix("Status: 201"), "\(created)")
    }

    @Test func fourWorkersStartingAtOnceMigrateANewDatabaseOnce() throws {
        let h = try GatewayHarness(workers: 4)
        // Each worker opened the fresh file and ran the migrator; every file is recorded once.
        #expect(migrationFileNames.count >= 3)
        #expect(h.sql("SELECT name FROM d1_migrations ORDER BY id").split(separator: "\n").map(String.init) == migrationFileNames)
        #expect(h.sql("SELECT count(*) FROM d1_migrations") == "\(migrationFileNames.count)")
        #expect(h.sql("PRAGMA journal_mode") == "wal")
        #expect(
            h.sql("SELECT group_concat(name, ',') FROM pragma_table_info('anonymous_weather_sessions')")
                == "id,installation_id_hash,platform,app_version,status,created_at,last_seen_at,revoked_at")
        #expect(
            h.sql("SELECT group_concat(name, ',') FROM pragma_table_info('weather_session_tokens')")
                == "id,session_id,token_hash,token_type,expires_at,created_at,revoked_at")
        // And the processes really share it: requests at once, all answered, by more than one.
        let (rounds, workers) = roundsUntilTwoWorkersAnswer(h, "/v1/health")
        for answers in rounds { #expect(answers.count == 8 && answers.allSatisfy { $0.status == 200 }) }
        #expect(workers.count >= 2, "\(workers)")
    }

    @Test func malformedParametersGet4xxAndTheWorkerKeepsServing() throws {
        let h = try GatewayHarness(workers: 1, startNginx: false)
        func viaFastCGI(_ shellEnv: String, stdin: String = "") -> String {
            ChildProcessOutput.run("/bin/bash", ["-c", "\(shellEnv) /usr/bin/cgi-fcgi -bind -connect \(h.socketPath)"], stdin: Data(stdin.utf8))
        }
        let cases: [(String, String, String)] = [
            ("missing method", "env -i REQUEST_URI=/v1/health", ""),
            (
                "absurd length", "env -i REQUEST_METHOD=POST REQUEST_URI=/v1/weather/session CONTENT_TYPE=application/json CONTENT_LENGTH=99999999999999999999",
                "{}"
            ),
            ("huge length", "env -i REQUEST_METHOD=POST REQUEST_URI=/v1/weather/session CONTENT_TYPE=application/json CONTENT_LENGTH=1000000", "{}"),
            (
                "short body", "env -i REQUEST_METHOD=POST REQUEST_URI=/v1/weather/session CONTENT_TYPE=application/json CONTENT_LENGTH=200",
                #"{"platform":"ios"}"#
            ),
            ("invalid utf-8 path", "env -i REQUEST_METHOD=GET REQUEST_URI=$'/v1/\\xff\\xfe'", ""),
            ("escaped invalid utf-8", "env -i REQUEST_METHOD=GET REQUEST_URI=/v1/%C3%28", ""),
            ("NUL escape", "env -i REQUEST_METHOD=GET REQUEST_URI='/v1/weather?lat=%00'", ""),
        ]
        for (name, env, body) in cases {
            let out = viaFastCGI(env, stdin: body)
            let status = Int(out.dropFirst("Status: ".count).prefix(3)) ?? 0
            #expect((400..<500).contains(status), "\(name): \(out.prefix(200))")
            #expect(out.contains("{\"error\":{\"code\":"), "\(name)")
            #expect(viaFastCGI("env -i REQUEST_METHOD=GET REQUEST_URI=/v1/health").hasPrefix("Status: 200"), "worker died after \(name)")
        }
        #expect(h.app?.isRunning == true)
    }

    @Test func sigtermStopsWorkersCleanly() throws {
        let h = try GatewayHarness(workers: 2, startNginx: false)
        let app = try #require(h.app)
        kill(app.pid, SIGTERM)
        #expect(waitUntil(timeout: 5) { !app.isRunning })
        #expect(app.terminationStatus == 0)
    }

    @Test(arguments: [1, 2])
    func missingDatabaseDirectoryIsAClearStartupError(workers: Int) throws {
        let socket = "/tmp/cw-never-\(getpid())-\(UUID().uuidString.prefix(8)).sock"
        let out = ChildProcessOutput.runData(
            "/bin/bash",
            [
                "-c",
                "WEATHER_DB_PATH=/nonexistent-dir/w.sqlite3 /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi --listen \(socket) --workers \(workers) 2>&1",
            ])
        let text = String(decoding: out.stdout, as: UTF8.self)
        #expect(out.status == 78)
        #expect(!FileManager.default.fileExists(atPath: socket), "the socket it will never serve is removed")
        #expect(!text.contains("/nonexistent-dir"), "a log line with a file path: \(text)")  // API.md: none in any log line
        #expect(text.contains("WEATHER_DB_PATH") && text.contains("weatherctl check"), "\(text)")
    }

    /// Run as plain CGI and unable to start, the program still answers its one request with the
    /// envelope and the headers every answer carries, and logs why under the same request id.
    @Test func cgiThatCannotStartAnswersTheEnvelope() throws {
        let out = ChildProcessOutput.runData(
            "/bin/bash",
            [
                "-c",
                "REQUEST_METHOD=GET REQUEST_URI=/v1/health HTTP_X_REQUEST_ID=rid-cgi-1 WEATHER_DB_PATH=/nonexistent-dir/w.sqlite3 /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi 2>&1 </dev/null",
            ])
        let text = String(decoding: out.stdout, as: UTF8.self)
        #expect(out.status == 78)
        #expect(text.contains("Status: 503 Service Unavailable\r\n"), "\(text)")
        // Its own request id, not the client's: without its settings it cannot tell a token from an id.
        let id = try #require(text.split(separator: "\r\n").first { $0.hasPrefix("X-Request-Id: w") }?.dropFirst("X-Request-Id: ".count))
        #expect(id.hasSuffix("-start") && !text.contains("rid-cgi-1"), "\(text)")
        #expect(text.contains("\r\nX-Content-Type-Options: nosniff\r\n"), "\(text)")
        #expect(text.contains(#"{"error":{"code":"service_unavailable","#), "\(text)")
        #expect(text.contains("request_id=\(id) the database directory") && !text.contains("/nonexistent-dir"), "\(text)")
    }

    /// The worker that applies migrations names them in its log, once: an upgrade's schema change
    /// (or a new database) leaves a line saying what changed and when.
    @Test func aWorkerNamesTheMigrationsItApplied() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-mig-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = cgiRequest("GET", "/v1/health", database: "\(dir.path)/w.sqlite3")
        #expect(first.text.contains("Status: 200 OK"), "\(first.text)")
        let names = migrationFileNames
        #expect(first.text.contains("applied \(names.count) migration(s) to the database: \(names.joined(separator: ", "))"), "\(first.text)")
        let second = cgiRequest("GET", "/v1/health", database: "\(dir.path)/w.sqlite3")
        #expect(second.text.contains("Status: 200 OK") && !second.text.contains("migration"), "\(second.text)")
        // Plain CGI runs the program for each request: no start line each time.
        #expect(!first.text.contains("version") && !second.text.contains("version"), "\(second.text)")
    }

    /// A relative database path would land wherever the web server starts the worker (the
    /// document root under mod_fcgid): the worker refuses it, and creates nothing.
    @Test func aRelativeDatabasePathIsRefusedAtStart() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-rel-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let (status, text) = cgiHealth("WEATHER_DB_PATH=w.sqlite3", before: "cd \(dir.path) && ")
        #expect(status == 78 && text.contains("Status: 503 Service Unavailable\r\n"), "\(text)")
        #expect(text.contains("WEATHER_DB_PATH must be an absolute path"), "\(text)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "no database made")
    }

    /// A settings file that gives a setting twice still serves (it did before: refusing it would
    /// stop the workers at an upgrade), and the worker names the setting and its lines, not its
    /// values, once at start.
    @Test func aWorkerServesASettingGivenTwiceAndNamesItsLines() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-twice-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let conf = dir.appendingPathComponent("weather.conf").path
        try "WEATHER_DB_PATH=/nonexistent/w.sqlite3\nCAIYUN_API_TOKEN=\nWEATHER_DB_PATH=\(dir.path)/w.sqlite3\nCAIYUN_API_TOKEN=caiyun-secret-1234\n"
            .write(toFile: conf, atomically: true, encoding: .utf8)
        let (status, text) = cgiHealth("WEATHER_CONFIG=\(conf)", before: "env -i PATH=/usr/bin:/bin ")
        #expect(status == 0 && text.contains("Status: 200 OK"), "the last line's database: \(text)")
        #expect(
            text.contains(
                "the settings file gives WEATHER_DB_PATH (lines 1 and 3), CAIYUN_API_TOKEN (lines 2 and 4) on more than one line: the last line's value is used"
            ),
            "\(text)")
        #expect(!text.contains("secret") && !text.contains("/nonexistent"), "\(text)")
    }

    /// A key file deleted while sessions are stored is not replaced: a worker that made a new one
    /// would disagree with the workers holding the old one (an incident drill: an idempotent
    /// refresh retry answered by the other worker revoked the session as a replay). A new
    /// database's first worker creates the key and says so.
    @Test func aDeletedHashKeyIsNotReplacedOnceSessionsAreStored() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-key-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyFile = dir.appendingPathComponent("hash.key").path
        func run(_ method: String, _ uri: String, body: String = "") -> (status: Int32, text: String) {
            cgiRequest(method, uri, body: body, database: "\(dir.path)/w.sqlite3")
        }
        let first = run("GET", "/v1/health")
        #expect(first.text.contains("Status: 200 OK") && first.text.contains("created the hash key file"), "\(first.text)")
        let key = try String(contentsOfFile: keyFile, encoding: .utf8)
        #expect(run("GET", "/v1/health").text.contains("created the hash key file") == false, "said once")

        // No session yet: a deleted key is made again (nothing was hashed with the old one).
        try FileManager.default.removeItem(atPath: keyFile)
        #expect(run("GET", "/v1/health").text.contains("created the hash key file"))
        let created = run("POST", "/v1/weather/session", body: #"{"platform":"ios","installationId":"0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"}"#)
        #expect(created.text.contains("Status: 201 "), "\(created.text)")

        try FileManager.default.removeItem(atPath: keyFile)
        let refused = run("GET", "/v1/health")
        #expect(refused.status == 78 && refused.text.contains("Status: 503"), "\(refused.text)")
        #expect(refused.text.contains("is missing, but the database holds sessions hashed with it: restore it from a backup"), "\(refused.text)")
        #expect(!FileManager.default.fileExists(atPath: keyFile), "no new key")
        #expect(!refused.text.contains(key.trimmingCharacters(in: .whitespacesAndNewlines)))
    }

    /// A database restored beside another `hash.key` (or a `WEATHER_HASH_KEY` that differs between
    /// hosts): the workers refuse to start once it holds sessions, `check` fails on it, and
    /// `--installation-id` lookups refuse rather than find nothing, until the operator puts the
    /// right key back or adopts this one on purpose (a disaster-recovery drill found the
    /// mismatch went unseen).
    @Test func aHashKeyOtherThanTheDatabasesStopsTheWorkersUntilAdopted() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-key-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let keyFile = dir.appendingPathComponent("hash.key").path, db = dir.appendingPathComponent("w.sqlite3").path
        func run(_ method: String, _ uri: String, body: String = "") -> (status: Int32, text: String) {
            cgiRequest(method, uri, body: body, database: db)
        }
        func ctl(_ args: String) -> (status: Int32, text: String) {
            let out = ChildProcessOutput.runData("/bin/bash", ["-c", "WEATHER_DB_PATH=\(db) /usr/bin/timeout -k 5 30 \(binDirectory)/weatherctl \(args) 2>&1"])
            return (out.status, String(decoding: out.stdout, as: UTF8.self))
        }
        let install = "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"
        let created = run("POST", "/v1/weather/session", body: #"{"platform":"ios","installationId":"\#(install)"}"#)
        #expect(created.text.contains("Status: 201 "), "\(created.text)")
        #expect(created.text.contains("recorded the hash key's fingerprint in the database (a new database"), "said once, at the first start")
        #expect(!run("GET", "/v1/health").text.contains("recorded the hash key"))
        let key = try String(contentsOfFile: keyFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let recorded = ChildProcessOutput.run("/usr/bin/sqlite3", [db, "SELECT fingerprint FROM weather_hash_key"])
        #expect(recorded.trimmingCharacters(in: .whitespacesAndNewlines).count == 64 && !recorded.contains(key), "a fingerprint, not the key")
        #expect(ctl("check").text.contains("the key is the one recorded"))

        // Restored beside another key.
        try FileManager.default.removeItem(atPath: keyFile)
        FileManager.default.createFile(atPath: keyFile, contents: Data((String(repeating: "7", count: 64) + "\n").utf8), attributes: [.posixPermissions: 0o600])
        let refused = run("GET", "/v1/health")
        #expect(refused.status == 78 && refused.text.contains("Status: 503"), "\(refused.text)")
        #expect(refused.text.contains("is not the one this database records for its sessions"), "\(refused.text)")
        let check = ctl("check")
        #expect(check.status == 1 && check.text.contains("FAIL    hash key record"), "\(check.text)")
        let lookup = ctl("sessions list --installation-id \(install)")
        #expect(lookup.status == 1 && lookup.text.contains("weatherctl adopt-hash-key"), "\(lookup.text)")

        // Adopted on purpose: the workers start, and the old sessions' installation is not found.
        let adopted = ctl("adopt-hash-key --json")
        #expect(adopted.status == 0 && adopted.text.contains(#""hashKey": "replaced""#), "\(adopted.text)")
        #expect(ctl("adopt-hash-key --json").text.contains(#""hashKey": "unchanged""#))
        #expect(run("GET", "/v1/health").text.contains("Status: 200 OK"))
        #expect(ctl("check").status == 0)

        // A backup from before the record (none in it) beside a wrong key: nothing can check it,
        // and the first worker records it, saying the sessions predate the record; check says
        // so before.
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [db, "DELETE FROM weather_hash_key"])
        #expect(ctl("check").text.contains("nothing checks that the key is theirs"))
        let unchecked = run("GET", "/v1/health")
        #expect(unchecked.text.contains("Status: 200 OK") && unchecked.text.contains("already held sessions made before it kept a record"), "\(unchecked.text)")
        let none = ctl("sessions list --installation-id \(install) --json")
        #expect(none.status == 0 && none.text.contains(#""sessions": []"#), "\(none.text)")
    }

    @Test func badConfigurationStopsStartupNamingTheVariable() throws {
        let out = ChildProcessOutput.runData(
            "/bin/bash",
            [
                "-c",
                "WEATHER_DB_PATH=/nonexistent-dir/x.sqlite3 WEATHER_CACHE_TTL=soon /usr/bin/timeout -k 5 30 \(binDirectory)/weather-fcgi --listen /tmp/cw-never-\(getpid())-\(UUID().uuidString.prefix(8)).sock 2>&1",
            ])
        #expect(out.status == 78)
        #expect(String(decoding: out.stdout, as: UTF8.self).contains("WEATHER_CACHE_TTL"))
        // An unknown option is named; an argument that could carry a secret is not repeated.
        func run(_ argument: String) -> (status: Int32, output: String) {
            let out = ChildProcessOutput.runData("/bin/bash", ["-c", "/usr/bin/timeout -k 5 30 \"$0\" \"$1\" 2>&1", "\(binDirectory)/weather-fcgi", argument])
            return (out.status, String(decoding: out.stdout, as: UTF8.self))
        }
        let typo = run("--worker")
        #expect(typo.status == 64 && typo.output.contains("unknown argument --worker"), "\(typo.output)")
        let pasted = run("--caiyun-token=SECRETvalue0123456789")
        #expect(pasted.status == 64 && pasted.output.contains("not shown") && !pasted.output.contains("SECRET"), "\(pasted.output)")
    }
}

extension FoundationEndToEndTests {
    @Test func sigtermFinishesTheRequestInHandThenExits() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 1, env: fake.environment(providers: "caiyun", timeout: "3"))
        h.companions.append(fake)
        let token = try h.createSession()["weatherAccessToken"] as! String
        try fake.setMode("caiyun", "slow", delay: 1)
        let answer = Collector<HTTPResponse>()
        let answeredAt = Collector<UInt64>()
        let port = h.port
        let thread = Thread {
            if let r = try? HTTPClient.send(port: port, "GET", "/v1/weather?lat=3&lon=3", headers: ["X-Weather-Session-Token": token]) { answer.append(r) }
            answeredAt.append(DispatchTime.now().uptimeNanoseconds)
        }
        thread.start()
        usleep(400_000)  // the request is now waiting on the slow provider
        let app = try #require(h.app)
        #expect(answer.items.isEmpty, "answered before the stop signal: nothing was in hand")
        let signalled = DispatchTime.now().uptimeNanoseconds
        kill(app.pid, SIGTERM)
        #expect(waitUntil(timeout: 5) { !app.isRunning })
        #expect(waitUntil(timeout: 2) { !answer.items.isEmpty })
        #expect(answer.items.first?.status == 200, "the request in hand was answered")
        #expect(answer.items.first?.json["cache"] as? String == "miss", "the answer came from the slow provider call")
        #expect((answeredAt.items.first ?? 0) > signalled)
        #expect(app.terminationStatus == 0)
    }

    @Test func workerRecyclesAfterMaxRequests() throws {
        let h = try GatewayHarness(workers: 2, env: ["WEATHER_MAX_REQUESTS": "3"])
        for _ in 0..<20 { #expect(try h.request("GET", "/v1/health").status == 200) }
        let workers = Set(h.log.split(separator: "\n").compactMap { $0.split(separator: " ").first { $0.hasPrefix("worker=") } })
        #expect(workers.count >= 6, "20 requests at 3 per worker need at least 7 worker processes: \(workers.count)")
        #expect(h.isAppRunning)
    }
}

extension FoundationEndToEndTests {
    /// A server a test starts gets fds 0–2 and nothing else the test process has open: tests run in
    /// parallel, and a server holding another test's socket or pipe would keep it alive.
    @Test func aStartedServerInheritsNoOtherDescriptor() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)  // no close-on-exec, as HTTPClient's
        try #require(listener >= 0)
        defer { close(listener) }
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("cw-fds-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: out) }
        let child = try ChildProcess("/bin/ls", ["/proc/self/fd"], environment: [:], stdout: out)
        #expect(waitUntil(timeout: 5) { !child.isRunning })
        let fds = try String(contentsOfFile: out, encoding: .utf8).split(separator: "\n").compactMap { Int32($0) }
        #expect(!fds.contains(listener), "the child holds fd \(listener): \(fds)")
        #expect(fds.allSatisfy { $0 <= 3 }, "\(fds)")  // 0–2, and ls's own directory descriptor
    }
}

enum HTTPClientProbe {
    /// True when nothing accepts a connection on 127.0.0.1:`port`.
    static func nothingListens(on port: Int) -> Bool {
        (try? HTTPClient.connectLoopback(port: port, timeout: 1)).map { fd in
            close(fd); return false
        } ?? true
    }
}
