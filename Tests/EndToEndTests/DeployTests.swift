import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The shipped deployment files, run for real: nginx's server block, and Apache serving the
/// shared-hosting `htdocs/` with only its `.htaccess` (mod_fcgid, and plain CGI).
@Suite(.serialized) struct DeployTests {
    static let legacy = "legacy-token-0123456789"

    @Test func nginxServerBlockPassesConfigTest() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ngx-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let conf = ChildProcessOutput.run("/bin/bash", [repositoryRoot.appendingPathComponent("scripts/nginx-conf.sh").path, "18999", "/tmp/cw-x.sock", dir])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let result = ChildProcessOutput.runData("/bin/bash", ["-c", "/usr/sbin/nginx -t -c \(conf) 2>&1"])
        #expect(result.status == 0, "\(String(decoding: result.stdout, as: UTF8.self))")
        // Only port and socket path differ from the shipped file.
        let shipped = try String(contentsOf: repositoryRoot.appendingPathComponent("deploy/nginx/closet-weather.conf"), encoding: .utf8)
        let used = try String(contentsOfFile: dir + "/server.conf", encoding: .utf8)
        let changed = zip(shipped.split(separator: "\n", omittingEmptySubsequences: false), used.split(separator: "\n", omittingEmptySubsequences: false))
            .filter { $0 != $1 }
        #expect(
            changed.allSatisfy {
                $0.0.contains("listen") || $0.0.contains("weather.sock") || $0.0.contains("fastcgi_params") || $0.0.contains("/var/log/nginx/")
            }, "\(changed)")
    }

    @Test func wholeFlowThroughTheShippedNginxConfig() throws {
        let fake = try FakeProviders()
        var env = fake.environment()
        env["CLOSET_WEATHER_PROXY_TOKEN"] = Self.legacy
        let h = try GatewayHarness(workers: 2, env: env)
        h.companions.append(fake)
        try flow(port: h.port)
        // nginx answers what never reaches a worker with the same envelope.
        let outside = try HTTPClient.send(port: h.port, "GET", "/weather.sqlite3")
        #expect(outside.status == 404)
        #expect(outside.errorCode == "not_found")
        // The request id: a worker's own for what a worker answers (nginx passes none: its
        // $request_id cost a quarter of its instructions), nginx's for what nginx answers; the
        // access log records the one the client got (checked below).
        let answeredId = try HTTPClient.send(port: h.port, "GET", "/v1/health").headers["x-request-id"] ?? ""
        let nginxId = outside.headers["x-request-id"] ?? ""
        #expect(answeredId.wholeMatch(of: /w[0-9]+-[0-9]+/) != nil, "\(answeredId)")
        #expect(nginxId.wholeMatch(of: /[0-9a-f]{32}/) != nil, "\(nginxId)")
        // JSON whatever the path's extension, under the stock nginx.conf's mime.types (an
        // `/index.html` 404 was `text/html`, a TRACE of /openapi.json lacked the charset).
        for (method, path) in [("GET", "/index.html"), ("GET", "/robots.txt"), ("TRACE", "/openapi.json")] {
            let r = try HTTPClient.send(port: h.port, method, path)
            #expect(r.headers["content-type"] == "application/json; charset=utf-8", "\(method) \(path): \(r.headers)")
        }
        // HTTP/0.9 gets no bare answer without status line or headers: the connection is closed.
        let fd = try HTTPClient.connectLoopback(port: h.port, timeout: 5)
        defer { close(fd) }
        try HTTPClient.sendAll(fd, ArraySlice(Array("GET /v1/health\r\n".utf8)))
        var buffer = [UInt8](repeating: 0, count: 512)
        #expect(buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 512, 0) } <= 0, "HTTP/0.9 was answered")
        // The coordinates of a query spelled %3F or ;, or put in the path (404s), are not logged either.
        for path in ["/v1/weather%3Flat=31.2304&lon=121.4737", "/v1/weather;lat=31.2304&lon=121.4737", "/v1/weather/31.2304,121.4737"] {
            _ = try HTTPClient.send(port: h.port, "GET", path)
        }
        // Raw coordinates reach no log: not the access log, not nginx's error logs even when no
        // worker answers (where nginx would quote the request line), not the gateway's.
        h.stopApp()
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/weather?lat=31.2304&lon=121.4737").status == 503)
        let logs = logFiles(under: h.directory.appendingPathComponent("nginx").path)
        #expect(logs["access.log"]?.contains("\"GET /v1/weather HTTP/1.1\" 200") == true, "\(logs["access.log"] ?? "no access log")")
        #expect(logs["access.log"]?.contains("\"GET /v1/weather/ HTTP/1.1\" 404") == true, "\(logs["access.log"] ?? "no access log")")
        #expect(logs["access.log"]?.contains("\"GET /v1/weather HTTP/1.1\" 503") == true && logs["access.log"]?.contains("upstream=502") == true)
        #expect(logs["access.log"]?.contains(" rid=\(answeredId)\n") == true && logs["access.log"]?.contains(" rid=\(nginxId)\n") == true)
        #expect(h.log.contains(" request_id=\(answeredId) "), "the gateway's line of \(answeredId)")
        expectNoCoordinates(in: logs.merging(["gateway": h.log]) { $1 }, written: ["access.log", "gateway"])
    }

    /// Session → weather → refresh → weather → revoke → 401, as the app does it. `serverLog`: what
    /// the web server logged, shown when the first step fails.
    func flow(port: Int, prefix: String = "", serverLog: () -> String = { "" }) throws {
        let create = try HTTPClient.send(
            port: port, "POST", "\(prefix)/v1/weather/session", headers: ["Content-Type": "application/json"],
            body: jsonBytes(["platform": "ios", "appVersion": "1.0", "installationId": UUID().uuidString]))
        #expect(create.status == 201, "\(create.text)\n\(create.status == 201 ? "" : serverLog().suffix(3000))")
        #expect(create.headers["cache-control"] == "no-store")
        #expect(create.headers["x-request-id"] != nil)
        #expect(create.headers["x-content-type-options"] == "nosniff")
        // A failed step ends the test here, not the whole test process with a force unwrap (that
        // left every server of the run behind).
        let s = create.json
        let access = try #require(s["weatherAccessToken"] as? String, "\(create.text)")
        let sessionId = try #require(s["anonymousSessionId"] as? String), refresh = try #require(s["refreshToken"] as? String)
        let weather = try HTTPClient.send(port: port, "GET", "\(prefix)/v1/weather?lat=31.2304&lon=121.4737", headers: ["X-Weather-Session-Token": access])
        #expect(weather.status == 200, "\(weather.text)")
        #expect(weather.json["authMode"] as? String == "weather_session")
        let refreshed = try HTTPClient.send(
            port: port, "POST", "\(prefix)/v1/weather/session/refresh", headers: ["Content-Type": "application/json"],
            body: jsonBytes(["anonymousSessionId": sessionId, "refreshToken": refresh]))
        #expect(refreshed.status == 200)
        let next = refreshed.json
        let nextAccess = try #require(next["weatherAccessToken"] as? String, "\(refreshed.text)")
        let nextRefresh = try #require(next["refreshToken"] as? String)
        let trip = try HTTPClient.send(
            port: port, "GET", "\(prefix)/v1/weather/trip?lat=31.2&lon=121.5&start=\(utcDay(2))&end=\(utcDay(3))",
            headers: ["X-Weather-Session-Token": nextAccess])
        #expect(trip.status == 200, "\(trip.text)")
        let legacy = try HTTPClient.send(port: port, "GET", "\(prefix)/v1/weather?lat=31.2304&lon=121.4737", headers: ["X-Weather-Token": Self.legacy])
        #expect(legacy.json["authMode"] as? String == "weather_token")
        let revoke = try HTTPClient.send(
            port: port, "POST", "\(prefix)/v1/weather/session/revoke", headers: ["Content-Type": "application/json"],
            body: jsonBytes(["anonymousSessionId": sessionId, "refreshToken": nextRefresh]))
        #expect(revoke.status == 204)
        #expect(revoke.headers["content-length"] == nil, "a 204 with Content-Length (RFC 9110 §8.6)")
        let after = try HTTPClient.send(port: port, "GET", "\(prefix)/v1/weather?lat=31.2304&lon=121.4737", headers: ["X-Weather-Session-Token": nextAccess])
        #expect(after.status == 401)
        #expect(try HTTPClient.send(port: port, "GET", "\(prefix)/openapi.json").status == 200)
    }

    @Test(arguments: ["fcgid", "cgi"])
    func sharedHostingHtaccessServesTheFlowAndHidesSecrets(module: String) throws {
        let fake = try FakeProviders()
        let apache = try ApacheSharedHost(module: module, settings: fake.environment().merging(["CLOSET_WEATHER_PROXY_TOKEN": Self.legacy]) { $1 })
        try flow(port: apache.port) { apache.errorLog }
        // Misplaced secrets in the document root are refused, whatever their name says.
        for name in ApacheSharedHost.misplacedSecrets {
            let r = try HTTPClient.send(port: apache.port, "GET", ApacheSharedHost.urlPath(name))
            #expect(r.status == 403, "\(name) answered \(r.status)")
            #expect(!r.text.contains("SECRET"), "\(name) leaked")
            expectEnvelope(r, "forbidden", name)
            #expect(r.headers["x-request-id"]?.isEmpty == false, "\(name): Apache's own answer without a request id")
        }
        // Apache's own errors in this folder get the envelope too (ErrorDocument in .htaccess),
        // and a request id (session 17).
        for path in ["/nothing", "/", "/v2/weather"] {
            let r = try HTTPClient.send(port: apache.port, "GET", path)
            expectEnvelope(r, "not_found", path)
            #expect(r.headers["x-request-id"]?.isEmpty == false, "\(path): \(r.headers)")
        }
        // A body far over the limit is Apache's 413 in the envelope: mod_fcgid answered one over
        // 128 KiB with 500, and plain CGI dropped the connection of one over about 200 KB. The
        // program's own 413 (just over 4096 bytes) is unchanged.
        for size in [5_000, 300_000] {
            let r: HTTPResponse
            do {
                r = try HTTPClient.send(
                    port: apache.port, "POST", "/v1/weather/session", headers: ["Content-Type": "application/json"],
                    body: [UInt8](repeating: 32, count: size))
            } catch {
                Issue.record("\(size) bytes: \(error) \(apache.errorLog.split(separator: "\n").suffix(4).joined(separator: "\n"))")
                continue
            }
            #expect(r.status == 413, "\(size) bytes: \(r.status) \(r.text) \(apache.errorLog.suffix(1500))")
            expectEnvelope(r, "payload_too_large", "\(size) bytes")
        }
        // A chunked body has no Content-Length for the 413 rule: mod_fcgid takes up to 128 KiB
        // of it and passes it on with its length. The gateway's 413, not a dropped connection
        // (mod_fcgid's 500, the worker killed; a review of session 25). Plain CGI passes a
        // chunked body on decoded and without a length; the program reads it to its end (it
        // left it unread before session 27, and a chunked creation answered 400).
        func chunked(_ body: [UInt8]) -> [UInt8] {
            let head =
                "POST /v1/weather/session HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            // Two chunks, so that the web server, not the client, puts the body together.
            let half = body.count / 2
            return Array(head.utf8) + [body[..<half], body[half...]].flatMap { Array(String($0.count, radix: 16).utf8) + [13, 10] + $0 + [13, 10] }
                + Array("0\r\n\r\n".utf8)
        }
        for size in [5_000, 70_000, 100_000] {
            let r: HTTPResponse
            do { r = try HTTPClient.send(port: apache.port, "", "", rawRequest: chunked([UInt8](repeating: 32, count: size))) } catch {
                Issue.record("chunked \(size) bytes: \(error) \(apache.errorLog.suffix(800))")
                continue
            }
            #expect(r.status == 413, "chunked \(size) bytes: \(r.status) \(r.text) \(apache.errorLog.suffix(800))")
            expectEnvelope(r, "payload_too_large", "chunked \(size) bytes")
        }
        let created = try HTTPClient.send(
            port: apache.port, "", "", rawRequest: chunked(jsonBytes(["platform": "ios", "installationId": UUID().uuidString])))
        #expect(created.status == 201, "a chunked creation: \(created.status) \(created.text) \(apache.errorLog.suffix(800))")
        #expect(created.text.contains("\"weatherAccessToken\""))
        // Headers near Apache's limits (8 of 8,000 bytes) with a 1.5 KB body: more than 64 KiB
        // of FastCGI records, served.
        let padding = Dictionary(uniqueKeysWithValues: (0..<8).map { ("X-Pad-\($0)", String(repeating: "p", count: 8_000)) })
        let padded = try HTTPClient.send(
            port: apache.port, "POST", "/v1/weather/session", headers: padding.merging(["Content-Type": "application/json"]) { $1 },
            body: jsonBytes(["platform": "ios", "installationId": UUID().uuidString]) + [UInt8](repeating: 32, count: 1_500))
        #expect(padded.status == 201, "large head: \(padded.status) \(padded.text) \(apache.errorLog.suffix(800))")
        #expect(try HTTPClient.send(port: apache.port, "GET", "/privacy.html").status == 200)
        // The real database lives outside the document root, beside the config the program found itself.
        #expect(FileManager.default.fileExists(atPath: apache.dataDirectory + "/weather.sqlite3"))
        // The program named directly is refused: under CGI, Apache would pass a query string
        // without `=` as its arguments (`--listen ...`).
        let port = freePort()
        expectEnvelope(try HTTPClient.send(port: apache.port, "GET", "/weather.fcgi?--listen+127.0.0.1:\(port)"), "forbidden", "the program by name")
        expectEnvelope(try HTTPClient.send(port: apache.port, "GET", "/weather.fcgi/v1/health"), "forbidden", "the program by name, with a path")
        #expect(HTTPClientProbe.nothingListens(on: port))
        if module == "cgi" {
            // A program that cannot answer (a broken upload): Apache's 500, in the envelope. (CGI
            // runs the file anew for each request; mod_fcgid keeps the process it started.)
            let program = apache.root.appendingPathComponent("home/public_html/weather.fcgi").path
            try "#!/bin/sh\necho not a CGI answer\n".write(toFile: program, atomically: false, encoding: .utf8)
            expectEnvelope(try HTTPClient.send(port: apache.port, "GET", "/v1/health"), "internal_error", "broken program")
        }
        withExtendedLifetime(fake) {}
    }

    /// A settings file the program may not read (its mode) stops the start and says so: it was
    /// passed over as if absent, the defaults applied, and the error then blamed the database
    /// folder (a black-box shared-hosting audit).
    @Test func anUnreadableSettingsFileIsSaidToBeOne() throws {
        let fake = try FakeProviders()
        let apache = try ApacheSharedHost(module: "cgi", settings: fake.environment())
        #expect(chmod(apache.dataDirectory + "/weather.conf", 0) == 0)
        let r = try HTTPClient.send(port: apache.port, "GET", "/v1/health")
        expectEnvelope(r, "service_unavailable", "unreadable settings")
        #expect(
            apache.errorLog.contains(
                "the configuration file in closet-weather-data beside the program's folder cannot be read by this user: Permission denied"),
            "\(apache.errorLog.suffix(1500))")
        #expect(!apache.errorLog.contains(apache.dataDirectory), "a path in the log")
        // weatherctl from ~/bin (INSTALL.md) finds the same file: check fails naming it, as the
        // hosting user; a reading command passes over it (a monitoring user on a backup copy).
        let bin = apache.root.appendingPathComponent("home/bin")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(binDirectory)/weatherctl", toPath: bin.appendingPathComponent("weatherctl").path)
        _ = ChildProcessOutput.run("/bin/chmod", ["755", bin.path, bin.appendingPathComponent("weatherctl").path])
        let check = ChildProcessOutput.runData("/usr/sbin/runuser", ["-u", "nobody", "--", bin.appendingPathComponent("weatherctl").path, "check"])
        let text = String(decoding: check.stdout, as: UTF8.self)
        #expect(check.status == 1 && text.contains("weather.conf cannot be read by this user"), "\(text)")
        // A backup copy needs only the database's path: `check --copy` by a user who may not read
        // the settings validates it all the same.
        let copyFolder = apache.root.appendingPathComponent("backup")
        try FileManager.default.createDirectory(at: copyFolder, withIntermediateDirectories: true)
        let copy = copyFolder.appendingPathComponent("weather.sqlite3").path
        _ = ChildProcessOutput.run(
            "\(binDirectory)/weatherctl", ["migrate"], environment: ["WEATHER_DB_PATH": copy, "WEATHER_CONFIG": "/dev/null", "PATH": "/usr/bin:/bin"])
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [copy, "PRAGMA wal_checkpoint(TRUNCATE)"])
        for suffix in ["-wal", "-shm", "-writer"] { try? FileManager.default.removeItem(atPath: copy + suffix) }
        _ = ChildProcessOutput.run("/bin/chmod", ["755", copyFolder.path])
        _ = ChildProcessOutput.run("/bin/chmod", ["644", copy])
        let validated = ChildProcessOutput.runData(
            "/usr/sbin/runuser",
            [
                "-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(copy)",
                bin.appendingPathComponent("weatherctl").path, "check", "--copy",
            ])
        let validatedText = String(decoding: validated.stdout, as: UTF8.self)
        #expect(validated.status == 0 && validatedText.contains("passed over: this user cannot read it (--copy)"), "\(validatedText)")
        withExtendedLifetime(fake) {}
    }

    /// An upgrade under mod_fcgid as INSTALL.md does it (a new program renamed over
    /// `weather.fcgi`): the old process retires at its next quiet moment, where mod_fcgid kept it,
    /// with its memory and database connection, until Apache restarted (found by a black-box
    /// shared-hosting audit: four such processes after four upgrades, one 12 minutes later).
    @Test func anUpgradedProgramsOldProcessRetiresUnderModFcgid() throws {
        let fake = try FakeProviders()
        let apache = try ApacheSharedHost(module: "fcgid", settings: fake.environment().merging(["WEATHER_FLUSH_INTERVAL": "1"]) { $1 })
        #expect(try HTTPClient.send(port: apache.port, "GET", "/v1/health").status == 200, "\(apache.errorLog.suffix(2000))")
        let program = apache.root.appendingPathComponent("home/public_html/weather.fcgi").path
        /// Live processes (not zombies: their `exe` still reads) running `path`.
        func running(_ path: String) -> [Int32] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap(Int32.init).filter { pid in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe")) == path
            }
        }
        let old = running(program)
        #expect(!old.isEmpty, "no process runs \(program)")
        let upload = program + ".new"
        try FileManager.default.copyItem(atPath: program, toPath: upload)
        #expect(rename(upload, program) == 0)
        #expect(try HTTPClient.send(port: apache.port, "GET", "/v1/health").status == 200, "the new program")
        let gone = waitUntil(timeout: 10) { running(program + " (deleted)").isEmpty }
        #expect(gone, "the old program still runs in \(running(program + " (deleted)")): \(apache.errorLog.suffix(1500))")
        #expect(apache.errorLog.contains("retires: its program file was replaced"))
        #expect(!running(program).isEmpty, "the new program serves")
        #expect(try HTTPClient.send(port: apache.port, "GET", "/v1/health").status == 200)
        withExtendedLifetime(fake) {}
    }

    /// The data folder inside a document root (the program uploaded into a sub-folder): once
    /// the program has run, Apache refuses the settings, key and database there, through the
    /// `.htaccess` the program writes into the folder. (Before, they were served as files.)
    @Test(arguments: ["fcgid", "cgi"])
    func aDataFolderInsideTheDocumentRootIsRefusedOnceTheProgramHasRun(module: String) throws {
        let fake = try FakeProviders()
        let apache = try ApacheSharedHost(module: module, settings: fake.environment(), inSubfolder: true)
        #expect(try HTTPClient.send(port: apache.port, "GET", "\(apache.prefix)/v1/health").status == 200, "\(apache.errorLog.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: apache.dataDirectory + "/weather.sqlite3"))
        for name in ["weather.conf", "hash.key", "weather.sqlite3", "weather.sqlite3-wal", ".htaccess"] {
            let r = try HTTPClient.send(port: apache.port, "GET", "/closet-weather-data/\(name)")
            #expect(r.status == 403, "\(name) answered \(r.status)")
            #expect(!r.text.contains("WEATHER_DB_PATH") && !r.text.contains("SQLite format"), "\(name) leaked")
        }
        let written = try String(contentsOfFile: apache.dataDirectory + "/.htaccess", encoding: .utf8)
        #expect(written.contains("Require all denied"))
        withExtendedLifetime(fake) {}
    }

    /// `deploy/apache/closet-weather.conf` (mod_proxy_fcgi to the workers' socket) as shipped, only
    /// its address, socket, document root and logs changed (`scripts/apache-conf.sh`): the app's
    /// flow works, and what Apache refuses by itself, before or instead of a worker, is the JSON
    /// envelope with a request id.
    @Test func vpsVirtualHostServesTheFlowAndAnswersItsOwnErrorsInJSON() throws {
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment().merging(["CLOSET_WEATHER_PROXY_TOKEN": Self.legacy]) { $1 }, startNginx: false)
        h.companions.append(fake)
        let apache = try ApacheVirtualHost(socketPath: h.socketPath, directory: h.directory.appendingPathComponent("apache").path)
        let port = apache.port
        try flow(port: port)
        #expect(try HTTPClient.send(port: port, "GET", "/privacy.html").status == 200)
        // Every answer of the workers carries Apache's own id (mod_unique_id: base64url here; older
        // 2.4 releases write `@` for `_`, accepted since session 30), never one a worker made up
        // (`w<pid>-<n>`), so the two logs join.
        var ids: Set<String> = []
        for _ in 0..<40 {
            let id = try #require(try HTTPClient.send(port: port, "GET", "/v1/health").headers["x-request-id"])
            let parts = id.dropFirst().split(separator: "-", omittingEmptySubsequences: false)
            #expect(!(id.hasPrefix("w") && parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(\.isNumber) }), "a worker's own id: \(id)")
            #expect(id.count >= 16 && id.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "@" || $0 == "-" || $0 == "_") }, "\(id)")
            ids.insert(id)
        }
        #expect(ids.count == 40)

        func raw(_ text: String) throws -> HTTPResponse { try HTTPClient.send(port: port, "", "", rawRequest: Array(text.utf8)) }
        let create = "POST /v1/weather/session HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n"
        let cases: [(name: String, code: String, send: () throws -> HTTPResponse)] = [
            ("garbage request line", "invalid_request", { try raw("GARBAGE\r\n\r\n") }),
            (
                "NUL in the request line", "invalid_request",
                {
                    try HTTPClient.send(
                        port: port, "", "", rawRequest: Array("GET /v1/health?a=".utf8) + [0] + Array(" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
                }
            ),
            (
                "16 KB header", "invalid_request",
                { try HTTPClient.send(port: port, "GET", "/v1/health", headers: ["X-Big": String(repeating: "a", count: 16 * 1024)]) }
            ),
            ("negative Content-Length", "invalid_request", { try raw(create + "Content-Length: -1\r\n\r\n") }),
            ("path above the root", "invalid_request", { try raw("GET /../v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n") }),
            ("HTTP/1.1 without Host", "invalid_request", { try raw("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n") }),
            ("9 KB query", "uri_too_long", { try HTTPClient.send(port: port, "GET", "/v1/weather?lat=1&lon=2&x=" + String(repeating: "a", count: 9000)) }),
            ("%00 in the path", "not_found", { try HTTPClient.send(port: port, "GET", "/v1/weather%00") }),
            ("a path outside the API", "not_found", { try HTTPClient.send(port: port, "GET", "/nothing") }),
            ("a database copied into the document root", "forbidden", { try HTTPClient.send(port: port, "GET", "/weather.sqlite3") }),
            ("a backup of it", "forbidden", { try HTTPClient.send(port: port, "GET", "/weather.sqlite3.backup") }),
            ("an editor's copy of the settings", "forbidden", { try HTTPClient.send(port: port, "GET", "/weather.conf~") }),
            ("a malformed escape before coordinates", "invalid_request", { try HTTPClient.send(port: port, "GET", "/v1/weather%zz?lat=31.2304&lon=121.4737") }),
            ("TRACE", "method_not_allowed", { try HTTPClient.send(port: port, "TRACE", "/v1/health") }),
            (
                "20 KB body", "payload_too_large",
                {
                    try HTTPClient.send(
                        port: port, "POST", "/v1/weather/session", headers: ["Content-Type": "application/json"], body: [UInt8](repeating: 32, count: 20_000))
                }
            ),
        ]
        for c in cases {
            let r = try c.send()
            #expect((400..<500).contains(r.status), "\(c.name): \(r.status)")
            expectEnvelope(r, c.code, c.name)
            #expect(r.headers["x-request-id"]?.isEmpty == false, "\(c.name): \(r.headers)")
        }
        // Coordinates spelled into the path (404s) are not logged: %U, the decoded path, logged
        // the first one's whole.
        for path in ["/v1/weather%3Flat=31.2304&lon=121.4737", "/v1/weather;lat=31.2304&lon=121.4737", "/v1/weather/31.2304,121.4737"] {
            #expect(try HTTPClient.send(port: port, "GET", path).status == 404, "\(path)")
        }
        // No worker to answer: 503 in the envelope, not Apache's page.
        h.stopApp()
        let down = try HTTPClient.send(port: port, "GET", "/v1/weather?lat=31.2304&lon=121.4737")
        #expect(down.status == 503)
        expectEnvelope(down, "service_unavailable", "workers stopped")
        // Raw coordinates reach no log (the flow asked for 31.2304,121.4737 too).
        let logs = logFiles(under: apache.directory + "/logs")
        #expect(logs["closet-weather-access.log"]?.contains("\"GET /v1/weather HTTP/1.1\" 200") == true, "\(logs.keys.sorted())")
        #expect(logs["closet-weather-access.log"]?.contains("\"GET /v1/weather/ HTTP/1.1\" 404") == true, "\(logs.keys.sorted())")
        expectNoCoordinates(in: logs.merging(["gateway": h.log]) { $1 }, written: ["closet-weather-access.log", "gateway"])
    }
}

/// Every regular file below `directory` (logs), by name.
func logFiles(under directory: String) -> [String: String] {
    var out: [String: String] = [:]
    for name in (FileManager.default.enumerator(atPath: directory)?.allObjects as? [String]) ?? [] where name.hasSuffix(".log") {
        out[(name as NSString).lastPathComponent] = try? String(contentsOfFile: directory + "/" + name, encoding: .utf8)
    }
    return out
}

/// The test coordinates (31.2304, 121.4737) appear in none of `logs`, each of the `written` ones
/// among them and not empty; only their grid cell may.
func expectNoCoordinates(in logs: [String: String], written: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    for name in written { #expect(logs[name]?.isEmpty == false, "no \(name) among \(logs.keys.sorted())", sourceLocation: sourceLocation) }
    for (name, text) in logs {
        #expect(
            !text.contains("31.2304") && !text.contains("121.4737") && !text.contains("lat="), "\(name): \(text.suffix(600))", sourceLocation: sourceLocation)
    }
}

/// An error answer in the contract's shape: the code, JSON labelled as such, nosniff.
func expectEnvelope(_ r: HTTPResponse, _ code: String, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(r.errorCode == code, "\(what): \(r.status) \(r.text)", sourceLocation: sourceLocation)
    #expect(r.headers["content-type"] == "application/json; charset=utf-8", "\(what): \(r.headers)", sourceLocation: sourceLocation)
    #expect(r.headers["x-content-type-options"] == "nosniff", "\(what): \(r.headers)", sourceLocation: sourceLocation)
}

func utcDay(_ offset: Int) -> String {
    let f = DateFormatter()
    f.dateFormat = "yyyy-MM-dd"
    f.timeZone = TimeZone(identifier: "UTC")
    f.locale = Locale(identifier: "en_US_POSIX")
    return f.string(from: Date().addingTimeInterval(Double(offset) * 86400))
}

/// A private Apache 2.4 with the shared-hosting layout: `~/public_html` = `htdocs/` plus
/// `weather.fcgi`, and `~/closet-weather-data/weather.conf` beside it (no environment at all: the
/// program finds its configuration relative to itself, as on a real shared host).
///
/// With `inSubfolder`, the mistake INSTALL.md warns about: the program and `htdocs/` uploaded into
/// `~/public_html/weather/` (as a sub-domain whose root the host puts inside `public_html` has
/// them), so the data folder the program finds beside itself, `~/public_html/closet-weather-data/`,
/// lies inside the document root.
final class ApacheSharedHost {
    let root: URL
    let port = freePort()
    /// The URL path of the program's folder: "" at the top of the document root, else "/weather".
    let prefix: String
    let dataDirectory: String
    private var process: ChildProcess?
    /// Secrets, and copies of them, that end up in the document root by mistake: each is refused.
    static let misplacedSecrets = [
        "weather.conf", "hash.key", "weather.sqlite3", "weather.sqlite3-wal", "weather.sqlite3-shm", "weather.sqlite3-writer", ".env",
        "weather.sqlite3.backup", "weather.conf~", "weather.conf.save", "weather.conf.orig", "hash.key.old", "weather.sqlite3.gz",
        "site.tar.gz", "weather.db-writer", "weather.db-journal", "Weather.CONF",
        // Copies a desktop or an editor makes (session 17: these were served).
        "#weather.conf#", "weather.conf#", "weather.conf,v", "weather.conf copy", "weather.conf (1)", "hash.key copy",
        "hash.key (1)", "weather.sqlite3 2",
    ]
    /// `name` as a URL path component (spaces, `#`).
    static func urlPath(_ name: String) -> String {
        "/" + (name.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~()+,"))) ?? name)
    }
    /// Apache's error log, where a CGI program's standard error goes too.
    var errorLog: String { (try? String(contentsOfFile: root.path + "/logs/error.log", encoding: .utf8)) ?? "" }

    init(module: String, settings: [String: String], inSubfolder: Bool = false) throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("cw-apache-\(UUID().uuidString.prefix(8))")
        prefix = inSubfolder ? "/weather" : ""
        dataDirectory = root.appendingPathComponent(inSubfolder ? "home/public_html/closet-weather-data" : "home/closet-weather-data").path
        let fm = FileManager.default
        let docroot = root.appendingPathComponent("home/public_html")
        let programFolder = inSubfolder ? docroot.appendingPathComponent("weather") : docroot
        try fm.createDirectory(at: root.appendingPathComponent("run/fcgid"), withIntermediateDirectories: true)
        try fm.createDirectory(at: root.appendingPathComponent("logs"), withIntermediateDirectories: true)
        try fm.createDirectory(at: docroot.deletingLastPathComponent(), withIntermediateDirectories: true)
        if inSubfolder { try fm.createDirectory(at: docroot, withIntermediateDirectories: true) }
        try fm.copyItem(at: repositoryRoot.appendingPathComponent("htdocs"), to: programFolder)
        try fm.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        try fm.copyItem(atPath: "\(binDirectory)/weather-fcgi", toPath: programFolder.appendingPathComponent("weather.fcgi").path)
        for name in ApacheSharedHost.misplacedSecrets {
            try "SECRET misplaced\n".write(to: programFolder.appendingPathComponent(name), atomically: true, encoding: .utf8)
        }
        var conf = "WEATHER_DB_PATH=\(dataDirectory)/weather.sqlite3\n"
        for (k, v) in settings { conf += "\(k)=\(v)\n" }
        try conf.write(toFile: dataDirectory + "/weather.conf", atomically: true, encoding: .utf8)
        _ = ChildProcessOutput.run("/bin/chown", ["-R", "nobody:nogroup", root.path])
        _ = ChildProcessOutput.run("/bin/chmod", ["700", dataDirectory])
        _ = ChildProcessOutput.run("/bin/chmod", ["755", root.path, root.appendingPathComponent("home").path])

        let mods = "/usr/lib/apache2/modules"
        let handler =
            module == "fcgid"
            ? "LoadModule fcgid_module \(mods)/mod_fcgid.so\nFcgidIPCDir \(root.path)/run/fcgid\nFcgidProcessTableFile \(root.path)/run/fcgid_shm\n"
            : "LoadModule cgid_module \(mods)/mod_cgid.so\nScriptSock \(root.path)/run/cgisock\n"
        let httpd = """
            ServerRoot /etc/apache2
            PidFile \(root.path)/run/httpd.pid
            Listen 127.0.0.1:\(port)
            ServerName localhost
            User nobody
            Group nogroup
            ErrorLog \(root.path)/logs/error.log
            LogLevel warn
            LoadModule mpm_event_module \(mods)/mod_mpm_event.so
            LoadModule authz_core_module \(mods)/mod_authz_core.so
            LoadModule authz_host_module \(mods)/mod_authz_host.so
            LoadModule mime_module \(mods)/mod_mime.so
            LoadModule dir_module \(mods)/mod_dir.so
            LoadModule rewrite_module \(mods)/mod_rewrite.so
            LoadModule headers_module \(mods)/mod_headers.so
            LoadModule env_module \(mods)/mod_env.so
            \(handler)
            TypesConfig /etc/mime.types
            DocumentRoot \(docroot.path)
            <Directory />
                AllowOverride None
                Require all denied
            </Directory>
            <Directory \(docroot.path)>
                AllowOverride All
                Require all granted
            </Directory>
            """
        let confPath = root.appendingPathComponent("httpd.conf").path
        try httpd.write(toFile: confPath, atomically: true, encoding: .utf8)
        process = try ChildProcess(
            "/usr/sbin/apache2", ["-f", confPath, "-DFOREGROUND"], environment: ["PATH": "/usr/sbin:/usr/bin:/bin"],
            stderr: root.appendingPathComponent("logs/stderr.log").path)
        guard waitUntil({ (try? HTTPClient.send(port: self.port, "GET", "\(self.prefix)/privacy.html", timeout: 2)) != nil }) else {
            throw ClientError("apache did not start: \((try? String(contentsOfFile: root.path + "/logs/error.log", encoding: .utf8)) ?? "")")
        }
    }

    deinit {
        process?.stop()
        try? FileManager.default.removeItem(at: root)
    }
}

/// A private Apache 2.4 running `deploy/apache/closet-weather.conf` through `scripts/apache-conf.sh`
/// against workers listening on `socketPath` (the VPS layout). Stopped by pid when released.
final class ApacheVirtualHost {
    let port = freePort()
    let directory: String
    private var process: ChildProcess?

    init(socketPath: String, directory: String) throws {
        self.directory = directory
        let conf = ChildProcessOutput.run(
            "/bin/bash", [repositoryRoot.appendingPathComponent("scripts/apache-conf.sh").path, "\(port)", socketPath, directory]
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
        // Apache's children run as nobody: they must reach the htdocs copy and the socket (0666).
        _ = ChildProcessOutput.run("/bin/chmod", ["-R", "a+rX", directory])
        _ = ChildProcessOutput.run("/bin/chmod", ["a+x", (socketPath as NSString).deletingLastPathComponent])
        process = try ChildProcess(
            "/usr/sbin/apache2", ["-f", conf, "-DFOREGROUND"], environment: ["PATH": "/usr/sbin:/usr/bin:/bin"],
            stderr: directory + "/logs/stderr.log")
        guard waitUntil({ (try? HTTPClient.send(port: self.port, "GET", "/privacy.html", timeout: 2)) != nil }) else {
            throw ClientError("apache did not start: \((try? String(contentsOfFile: directory + "/logs/error.log", encoding: .utf8)) ?? "")")
        }
    }

    deinit { process?.stop() }
}
