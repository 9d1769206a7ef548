import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `weatherctl` as operators run it: a separate process on the live database of a running gateway.
@Suite(.serialized) struct WeatherctlTests {
    /// What one run of `weatherctl` left behind.
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String

        /// Standard output parsed as one JSON object (fails the test when it is not one).
        func json() throws -> [String: Any] {
            let value = try JSONSerialization.jsonObject(with: Data(stdout.utf8))
            return try #require(value as? [String: Any], "not a JSON object: \(stdout)")
        }
    }

    /// Runs `weatherctl args` with `environment` and collects both output streams.
    func ctl(_ args: [String], _ environment: [String: String], stdin: String? = nil) throws -> Run {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "\(binDirectory)/weatherctl")
        p.arguments = args
        p.environment = environment
        let errPath = FileManager.default.temporaryDirectory.appendingPathComponent("weatherctl-\(UUID().uuidString).err")
        FileManager.default.createFile(atPath: errPath.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: errPath) }
        let errHandle = try FileHandle(forWritingTo: errPath)
        let out = Pipe()
        p.standardOutput = out
        p.standardError = errHandle
        let input = Pipe()
        p.standardInput = stdin == nil ? FileHandle.nullDevice : input
        try p.run()
        if let stdin {
            try? input.fileHandleForWriting.write(contentsOf: Data(stdin.utf8))  // see ChildProcessOutput.runData
            try? input.fileHandleForWriting.close()
        }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        try errHandle.close()
        let err = (try? String(contentsOf: errPath, encoding: .utf8)) ?? ""
        return Run(status: p.terminationStatus, stdout: String(decoding: data, as: UTF8.self), stderr: err)
    }

    func ctl(_ args: [String], _ h: GatewayHarness, stdin: String? = nil) throws -> Run { try ctl(args, h.environment, stdin: stdin) }

    /// Writes to the live database with `sqlite3`, waiting for the workers' write lock.
    func sqlWrite(_ h: GatewayHarness, _ statements: String) {
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", ["-cmd", ".timeout 5000", h.databasePath, statements])
    }

    func keyFile(_ h: GatewayHarness) -> String {
        (h.databasePath as NSString).deletingLastPathComponent + "/hash.key"
    }

    func weather(_ h: GatewayHarness, token: String) throws -> Int {
        try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Session-Token": token]).status
    }

    /// Weather requests with `token`, eight at once, until both workers of `h` have answered some;
    /// their statuses.
    func fromBothWorkers(_ h: GatewayHarness, token: String) -> [Int] {
        let (rounds, workers) = roundsUntilTwoWorkersAnswer(h, "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Session-Token": token])
        #expect(workers.count == 2, "answered by \(workers)")
        return rounds.joined().map(\.status)
    }

    /// An environment whose database does not exist, for commands that must not need one.
    var nowhere: [String: String] {
        ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": "/nonexistent-\(UUID().uuidString)/weather.sqlite3"]
    }

    // MARK: check and migrate

    @Test func checkPassesOnALiveServiceAndFailsWithAWorldReadableKeyFile() throws {
        let h = try GatewayHarness(workers: 2)
        _ = try h.createSession()
        let ok = try ctl(["check"], h)
        #expect(ok.status == 0, "\(ok.stdout)\(ok.stderr)")
        for name in [
            "configuration", "providers", "legacy token", "hash key", "storage", "file modes", "database", "integrity", "journal mode", "clean-up",
            "migrations", "hash key record", "rate buckets",
        ] {
            #expect(ok.stdout.contains(name))
        }
        #expect(!ok.stdout.contains("FAIL"))
        // The worker that answered first ran the clean-up (no timer here).
        #expect(ok.stdout.contains("last run ") && ok.stdout.contains("min ago; the workers run it when none ran for 90000 s"), "\(ok.stdout)")
        let json = try ctl(["check", "--json"], h)
        #expect(json.status == 0)
        #expect(try json.json()["ok"] as? Bool == true)
        #expect((try json.json()["checks"] as? [[String: Any]])?.count == 13)
        // Which release this is, in both forms and from --version; the supervisor's start line
        // says the workers' (a build outside `make dist` is "dev"; DistTests checks a bundle's).
        #expect(ok.stdout.hasSuffix("all checks passed (weatherctl dev)\n"), "\(ok.stdout)")
        #expect(try json.json()["version"] as? String == "dev")
        #expect(try ctl(["--version"], h).stdout == "weatherctl dev\n")
        #expect(try ctl(["--json", "--version"], h).json()["version"] as? String == "dev")
        #expect(h.log.contains("weather-fcgi: version dev, starting 2 workers (supervisor pid "), "\(h.log)")
        #expect(!h.log.contains("serving (pid"), "a worker of the supervisor's repeated the line: \(h.log)")

        // A clean-up more than three days old: nothing runs it, and that fails.
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [h.databasePath, "UPDATE weather_maintenance SET started_at = started_at - 4 * 86400"])
        let stale = try ctl(["check"], h)
        let cleanUp = stale.stdout.split(separator: "\n").first { $0.contains("clean-up") }.map(String.init) ?? ""
        #expect(
            stale.status == 1 && cleanUp.hasPrefix("FAIL") && cleanUp.contains("4 day(s) ago") && cleanUp.contains("prune timer or cron"), "\(stale.stdout)")
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [h.databasePath, "UPDATE weather_maintenance SET started_at = started_at + 4 * 86400"])

        // The mark a worker leaves on meeting a damaged file, left on a sound one (a repair made
        // in place, or a new file with the old one's inode number): every worker answers health
        // 503 until `check` finds the file sound and clears it (a review).
        var st = stat()
        #expect(stat(h.databasePath, &st) == 0)
        let page = try FileHandle(forUpdating: URL(fileURLWithPath: h.databasePath + "-writer"))
        try page.seek(toOffset: 256)
        try page.write(contentsOf: withUnsafeBytes(of: (UInt64(st.st_ino) + 1).littleEndian) { Data($0) })
        try page.close()
        #expect(try h.request("GET", "/v1/health").status == 503)
        let clearing = try ctl(["check"], h)
        #expect(clearing.status == 0 && clearing.stdout.contains("cleared the damage mark"), "\(clearing.stdout)")
        #expect(try h.request("GET", "/v1/health").status == 200)
        #expect(try !ctl(["check"], h).stdout.contains("cleared the damage mark"), "said once")

        // A database others may read (files made before this release kept a shell's 0644), in
        // a folder that lets them in: said, and a failure.
        chmod((h.databasePath as NSString).deletingLastPathComponent, 0o755)
        #expect(chmod(h.databasePath, 0o644) == 0)
        let exposed = try ctl(["check"], h)
        let modes = exposed.stdout.split(separator: "\n").first { $0.contains("file modes") }.map(String.init) ?? ""
        #expect(exposed.status == 1 && modes.hasPrefix("FAIL") && modes.contains("other users may read \(h.databasePath)"), "\(exposed.stdout)")
        #expect(chmod(h.databasePath, 0o640) == 0)

        #expect(chmod(keyFile(h), 0o644) == 0)
        defer { chmod(keyFile(h), 0o600) }
        let bad = try ctl(["check"], h)
        #expect(bad.status == 1)
        let line = try #require(bad.stdout.split(separator: "\n").first { $0.contains("hash key") })
        #expect(line.hasPrefix("FAIL"))
        #expect(line.contains("chmod 600"))
        let badJSON = try ctl(["check", "--json"], h)
        #expect(badJSON.status == 1)
        #expect(try badJSON.json()["ok"] as? Bool == false)
        // The key itself is never printed, whatever the outcome.
        let key = try String(contentsOfFile: keyFile(h), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        for run in [ok, json, bad, badJSON] { #expect(!run.stdout.contains(key) && !run.stderr.contains(key)) }

        // A key the workers would find too short (31 characters and a tab) fails here too.
        let saved = try Data(contentsOf: URL(fileURLWithPath: keyFile(h)))
        defer { try? saved.write(to: URL(fileURLWithPath: keyFile(h))); chmod(keyFile(h), 0o600) }
        try Data((String(repeating: "k", count: 31) + "\t").utf8).write(to: URL(fileURLWithPath: keyFile(h)))
        #expect(chmod(keyFile(h), 0o600) == 0)
        let short = try ctl(["check"], h)
        let shortLine = short.stdout.split(separator: "\n").first { $0.contains("hash key") }.map(String.init) ?? ""
        #expect(short.status == 1 && shortLine.hasPrefix("FAIL") && shortLine.contains("shorter than 32"), "\(short.stdout)")
        try saved.write(to: URL(fileURLWithPath: keyFile(h)))
        #expect(chmod(keyFile(h), 0o600) == 0)

        // The key gone while sessions are stored: no worker would start (it will not make another).
        chmod(keyFile(h), 0o600)
        try FileManager.default.removeItem(atPath: keyFile(h))
        defer { FileManager.default.createFile(atPath: keyFile(h), contents: Data((key + "\n").utf8), attributes: [.posixPermissions: 0o600]) }
        let lost = try ctl(["check"], h)
        let lostLine = lost.stdout.split(separator: "\n").first { $0.contains("hash key") }.map(String.init) ?? ""
        #expect(lost.status == 1 && lostLine.hasPrefix("FAIL") && lostLine.contains("the database holds sessions"), "\(lost.stdout)")
    }

    /// INSTALL.md runs `migrate` and `check` before the first worker starts: no key file yet is
    /// fine where the service user can create it, and a failure where it cannot.
    @Test func checkBeforeTheFirstStartAcceptsAKeyFileNotCreatedYet() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-first-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { chmod(dir.path, 0o700); try? FileManager.default.removeItem(at: dir) }
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": dir.appendingPathComponent("weather.sqlite3").path]
        #expect(try ctl(["migrate"], env).status == 0)
        let fresh = try ctl(["check"], env)
        #expect(fresh.status == 0, "\(fresh.stdout)")
        #expect(fresh.stdout.contains("not created yet"))
        #expect(fresh.stdout.contains("not run yet; the workers run it when none ran for 90000 s"), "\(fresh.stdout)")
        #expect(fresh.stdout.contains("loaded from the environment alone (no file: WEATHER_CONFIG is unset"), "\(fresh.stdout)")
        let confFile = dir.appendingPathComponent("weather.conf").path
        try "WEATHER_CACHE_TTL=600\r\n".write(toFile: confFile, atomically: true, encoding: .utf8)
        let withFile = try ctl(["check"], env.merging(["WEATHER_CONFIG": confFile]) { $1 })
        #expect(withFile.status == 0 && withFile.stdout.contains("loaded from \(confFile) and the environment"), "\(withFile.stdout)")
        // A value with what looks like a comment after it: kept as it always was, and said by
        // check (a FAIL naming the setting, never its value) and by the gateway's start.
        try "WEATHER_CACHE_TTL=600\nCLOSET_WEATHER_PROXY_TOKEN=legacy-secret-0123456789  # app 1.x\n".write(toFile: confFile, atomically: true, encoding: .utf8)
        let commented = try ctl(["check"], env.merging(["WEATHER_CONFIG": confFile]) { $1 })
        let row = commented.stdout.split(separator: "\n").first { $0.contains("comments") }.map(String.init) ?? ""
        #expect(
            commented.status == 1 && row.hasPrefix("FAIL") && row.contains("CLOSET_WEATHER_PROXY_TOKEN holds \" #\"") && row.contains("put it in quotes"),
            "\(commented.stdout)")
        #expect(!commented.stdout.contains("legacy-secret") && !commented.stdout.contains("app 1.x"))
        let started = ChildProcessOutput.runData(
            "/bin/bash", ["-c", "\(binDirectory)/weather-fcgi 2>&1 >/dev/null"],
            environment: env.merging(
                [
                    "WEATHER_CONFIG": confFile, "GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health",
                    "WEATHER_HASH_KEY": String(repeating: "k", count: 32),
                ]) { $1 })
        let log = String(decoding: started.stdout, as: UTF8.self)
        #expect(started.status == 0 && log.contains("CLOSET_WEATHER_PROXY_TOKEN holds \" #\"") && !log.contains("legacy-secret"), "\(log)")
        try "WEATHER_CACHE_TTL\n".write(toFile: confFile, atomically: true, encoding: .utf8)
        let badFile = try ctl(["check"], env.merging(["WEATHER_CONFIG": confFile]) { $1 })
        #expect(badFile.status == 1 && badFile.stdout.contains("line 1, is not KEY=VALUE (WEATHER_CONFIG is \(confFile))"), "\(badFile.stdout)")
        try FileManager.default.removeItem(atPath: confFile)
        // Which providers the workers will call: said, never a failure.
        #expect(fresh.stdout.contains("providers") && fresh.stdout.contains("none configured"))
        let caiyunOnly = try ctl(["check"], env.merging(["CAIYUN_API_TOKEN": "t"]) { $1 })
        #expect(caiyunOnly.status == 0 && caiyunOnly.stdout.contains("caiyun only: trips ending more than about 14 days ahead answer 502"))
        let keys = ["CAIYUN_API_TOKEN": "caiyun-secret-1234", "VISUAL_CROSSING_API_KEY": "vc-secret-5678"]
        let both = try ctl(["check"], env.merging(keys.merging(["WEATHER_PROVIDERS": "visualcrossing,caiyun"]) { $1 }) { $1 })
        #expect(both.stdout.contains("visualcrossing, caiyun (in this order)"))
        #expect(!both.stdout.contains("secret") && !both.stderr.contains("secret"))
        // Whether old app builds' token is accepted: said, never a failure, never the token.
        #expect(fresh.stdout.contains("legacy token") && fresh.stdout.contains("off (CLOSET_WEATHER_PROXY_TOKEN unset)"))
        let legacy = try ctl(
            ["check"], env.merging(["CLOSET_WEATHER_PROXY_TOKEN": "legacy-secret-0123456789", "WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR": "50"]) { $1 })
        #expect(
            legacy.status == 0 && legacy.stdout.contains("on: X-Weather-Token accepted on the weather routes, 50 requests per client address per hour"),
            "\(legacy.stdout)")
        #expect(!legacy.stdout.contains("legacy-secret"))
        // A short one (shipped builds fix it): accepted with a warning, still never shown.
        let short = try ctl(["check"], env.merging(["CLOSET_WEATHER_PROXY_TOKEN": "app1xkey"]) { $1 })
        #expect(
            short.status == 0 && short.stdout.contains("on: X-Weather-Token accepted")
                && short.stdout.contains("warning: CLOSET_WEATHER_PROXY_TOKEN is shorter than 16 characters"), "\(short.stdout)")
        #expect(!short.stdout.contains("app1xkey"))
        // Settings the shipped privacy notice states as facts: changed, the notice is untrue until
        // edited, which the configuration row says (never a failure); unchanged, nothing.
        let finer = try ctl(["check"], env.merging(["WEATHER_GRID_DEGREES": "0.01", "WEATHER_CACHE_TTL": "300"]) { $1 })
        #expect(
            finer.status == 0
                && finer.stdout.contains("warning: WEATHER_GRID_DEGREES, WEATHER_CACHE_TTL differ from what the shipped privacy notice states"),
            "\(finer.stdout)")
        #expect(!fresh.stdout.contains("privacy notice"))
        // ... and by a worker at its start, which accepts it (past the token: no provider here).
        let shortServed = ChildProcessOutput.runData(
            "/bin/bash", ["-c", "\(binDirectory)/weather-fcgi 2>&1"],
            environment: env.merging(
                [
                    "CLOSET_WEATHER_PROXY_TOKEN": "app1xkey", "GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET",
                    "REQUEST_URI": "/v1/weather?lat=1&lon=1", "QUERY_STRING": "lat=1&lon=1", "HTTP_X_WEATHER_TOKEN": "app1xkey",
                    "WEATHER_HASH_KEY": String(repeating: "k", count: 32),
                ]) { $1 })
        let shortLog = String(decoding: shortServed.stdout, as: UTF8.self)
        #expect(shortLog.contains("warning: CLOSET_WEATHER_PROXY_TOKEN is shorter than 16 characters"), "\(shortLog)")
        #expect(shortLog.contains("Status: 503") && shortLog.contains("provider_not_configured") && !shortLog.contains("app1xkey"), "\(shortLog)")
        #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("hash.key").path))  // check creates nothing

        // A folder the service user cannot write: the worker could not create the key either.
        // (Run as nobody, since root writes anywhere.)
        guard isRoot || privilegedTestsRequired else { return }
        try requirePrivilege(isRoot, "root, to run as nobody")
        _ = ChildProcessOutput.run("/bin/chown", ["-R", "nobody", dir.path])
        chmod(dir.path, 0o500)
        let out = ChildProcessOutput.runData(
            "/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(env["WEATHER_DB_PATH"]!)", "\(binDirectory)/weatherctl", "check"])
        let text = String(decoding: out.stdout, as: UTF8.self)
        #expect(out.status == 1, "\(text)")
        #expect(text.split(separator: "\n").contains { $0.hasPrefix("FAIL") && $0.contains("hash key") && $0.contains("cannot create") }, "\(text)")
        // A folder this user may not enter hides the key; it is not missing.
        _ = ChildProcessOutput.run("/bin/chown", ["-R", "root", dir.path])
        chmod(dir.path, 0o700)
        let hidden = ChildProcessOutput.runData(
            "/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(env["WEATHER_DB_PATH"]!)", "\(binDirectory)/weatherctl", "check"])
        let hiddenText = String(decoding: hidden.stdout, as: UTF8.self)
        let keyRow = hiddenText.split(separator: "\n").first { $0.contains("hash key") }.map(String.init) ?? ""
        #expect(
            hidden.status == 1 && keyRow.hasPrefix("FAIL") && keyRow.contains("permission denied on its folder") && !keyRow.contains("does not exist"),
            "\(hiddenText)")
    }

    /// A provider key that `WEATHER_PROVIDERS` leaves out is never used: `check` says so on its
    /// providers row, naming the key's variable and never its value. A warning, not a failure:
    /// leaving a provider out for a while is a fair thing to do.
    @Test func checkSaysWhenWeatherProvidersLeavesOutAProviderWithAKey() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-left-out-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": dir.appendingPathComponent("weather.sqlite3").path]
        #expect(try ctl(["migrate"], env).status == 0)
        let keys = ["CAIYUN_API_TOKEN": "caiyun-secret-1234", "VISUAL_CROSSING_API_KEY": "vc-secret-5678"]
        func providersRow(_ settings: [String: String]) throws -> (status: Int32, detail: String) {
            let run = try ctl(["check", "--json"], env.merging(settings) { $1 })
            #expect(!run.stdout.contains("secret") && !run.stderr.contains("secret"), "\(run.stdout)")
            let checks = try #require(try run.json()["checks"] as? [[String: Any]], "\(run.stdout)")
            let row = try #require(checks.first { $0["name"] as? String == "providers" }, "\(run.stdout)")
            #expect(row["ok"] as? Bool == true)
            return (run.status, row["detail"] as? String ?? "")
        }
        let caiyunOnly = try providersRow(keys.merging(["WEATHER_PROVIDERS": "caiyun"]) { $1 })
        #expect(caiyunOnly.status == 0, "a warning, not a failure")
        #expect(
            caiyunOnly.detail.hasPrefix("caiyun only: ")
                && caiyunOnly.detail.hasSuffix(
                    "; warning: VISUAL_CROSSING_API_KEY is set, but WEATHER_PROVIDERS (caiyun) leaves out visualcrossing, so that key is never used"
                        + " (add visualcrossing to WEATHER_PROVIDERS, or unset VISUAL_CROSSING_API_KEY)"),
            "\(caiyunOnly.detail)")
        // The list names only a provider without a key: none is called, and the key set is why.
        let noneCalled = try providersRow(["CAIYUN_API_TOKEN": keys["CAIYUN_API_TOKEN"]!, "WEATHER_PROVIDERS": "visualcrossing"])
        #expect(
            noneCalled.detail.hasPrefix(
                "none of WEATHER_PROVIDERS has a key: the weather routes answer 503 provider_not_configured; warning: CAIYUN_API_TOKEN is set"),
            "\(noneCalled.detail)")
        // The human table says it too.
        let table = try ctl(["check"], env.merging(keys.merging(["WEATHER_PROVIDERS": "visualcrossing"]) { $1 }) { $1 })
        #expect(table.stdout.contains("warning: CAIYUN_API_TOKEN is set, but WEATHER_PROVIDERS (visualcrossing) leaves out caiyun"), "\(table.stdout)")
        // A key that would travel in clear text: warned, the setting named, nothing repeated.
        let clear = try providersRow(keys.merging(["VISUAL_CROSSING_BASE_URL": "http://weather.visualcrossing.com"]) { $1 })
        #expect(
            clear.status == 0
                && clear.detail.hasSuffix(
                    "; warning: VISUAL_CROSSING_BASE_URL is plain http:// to a host other than this machine, so the provider's key travels unencrypted; use https:// (or a proxy on this machine)"
                ), "\(clear.detail)")
        // Every keyed provider listed, or no key at all: no warning.
        for settings in [keys, keys.merging(["WEATHER_PROVIDERS": "visualcrossing,caiyun"]) { $1 }, ["WEATHER_PROVIDERS": "caiyun"]] {
            #expect(try !providersRow(settings).detail.contains("warning"), "\(settings.keys.sorted())")
        }
    }

    /// The workers refuse a relative WEATHER_DB_PATH; check, which would find the file from the
    /// operator's folder, fails on it too, except for a backup copy.
    @Test func checkFailsOnARelativeDatabasePathTheWorkersRefuse() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-relative-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        func run(_ args: String) -> (status: Int32, text: String) {
            let out = ChildProcessOutput.runData(
                "/bin/bash",
                ["-c", "cd \(dir.path) && env -i PATH=/usr/bin:/bin WEATHER_DB_PATH=weather.sqlite3 \(binDirectory)/weatherctl \(args) 2>&1 </dev/null"])
            return (out.status, String(decoding: out.stdout, as: UTF8.self))
        }
        #expect(run("migrate").status == 0)
        #expect(FileManager.default.fileExists(atPath: dir.appendingPathComponent("weather.sqlite3").path), "weatherctl takes it")
        let live = run("check")
        #expect(live.status == 1 && live.text.contains("WEATHER_DB_PATH is relative: the workers refuse it"), "\(live.text)")
        let copy = run("check --copy")
        #expect(copy.status == 0 && !copy.text.contains("relative"), "\(copy.text)")
    }

    /// A settings file whose refused value has a comment after it, or that sets a setting twice:
    /// `check` fails naming the setting, where the comment goes or its lines, and no value.
    @Test func checkSaysWhereACommentGoesAndWhichLinesRepeatASetting() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-conf-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let confFile = dir.appendingPathComponent("weather.conf").path
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": dir.appendingPathComponent("weather.sqlite3").path, "WEATHER_CONFIG": confFile]
        try "WEATHER_MOUNT_PREFIX=/api # behind nginx\n".write(toFile: confFile, atomically: true, encoding: .utf8)
        let commented = try ctl(["check"], env)
        #expect(
            commented.status == 1
                && commented.stdout.contains(
                    "WEATHER_MOUNT_PREFIX holds ?, # or a control character: it is the path before /v1, without a query or fragment"
                        + " (the settings file has no comments after a value")
                && commented.stdout.contains("put a comment on a line of its own"),
            "\(commented.stdout)")
        #expect(!commented.stdout.contains("behind nginx"))
        try "CAIYUN_API_TOKEN=\n# mine\nCAIYUN_API_TOKEN=caiyun-secret-1234\n".write(toFile: confFile, atomically: true, encoding: .utf8)
        let twice = try ctl(["check", "--json"], env)
        let checks = try #require(try twice.json()["checks"] as? [[String: Any]], "\(twice.stdout)")
        let row = try #require(checks.first { $0["name"] as? String == "repeated settings" }, "\(twice.stdout)")
        #expect(twice.status == 1 && row["ok"] as? Bool == false)
        #expect(
            row["detail"] as? String
                == "the settings file gives CAIYUN_API_TOKEN (lines 1 and 3) on more than one line: the last line's value is used; keep one line for each setting"
        )
        #expect(!twice.stdout.contains("secret"))
        // The last line's key is the one used; the environment's value wins and silences it.
        let providers = try #require(checks.first { $0["name"] as? String == "providers" }?["detail"] as? String)
        #expect(providers.contains("caiyun"), "\(providers)")
        let overridden = try ctl(["check", "--json"], env.merging(["CAIYUN_API_TOKEN": "from-the-environment"]) { $1 })
        let rows = try #require(try overridden.json()["checks"] as? [[String: Any]], "\(overridden.stdout)")
        #expect(rows.first?["name"] as? String == "configuration" && rows.first?["ok"] as? Bool == true, "\(overridden.stdout)")
        #expect(
            rows.contains { $0["name"] as? String == "providers" } && !rows.contains { $0["name"] as? String == "repeated settings" }, "\(overridden.stdout)")
    }

    /// A database the service user cannot write (restored from a backup with root's `cp`), or a
    /// nearly full disk, fails `storage`: the service answered every write 503 while check said
    /// all was well. Run as root, check judges the files by the folder's owner, the service user.
    @Test(needs(isRoot && mountsWork, "needs root, to run as nobody, and mount(2)"))
    func checkFailsWhenTheServiceUserCannotWriteOrTheDiskIsNearlyFull() throws {
        try requirePrivilege(isRoot && mountsWork, "root and mount(2)")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-storage-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = dir.appendingPathComponent("weather.sqlite3").path
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": db]
        _ = ChildProcessOutput.run("/bin/chown", ["nobody:nogroup", dir.path])
        #expect(try ctl(["migrate"], env).status == 0)  // gives the files to nobody
        func storageLine(_ output: String) -> String { output.split(separator: "\n").first { $0.contains(" storage ") }.map(String.init) ?? "" }
        func asNobody() -> (status: Int32, output: String) {
            let out = ChildProcessOutput.runData(
                "/usr/sbin/runuser", ["-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(db)", "\(binDirectory)/weatherctl", "check"])
            return (out.status, String(decoding: out.stdout, as: UTF8.self))
        }
        let fine = try ctl(["check"], env)
        #expect(fine.status == 0 && storageLine(fine.stdout).hasPrefix("ok") && storageLine(fine.stdout).contains("MiB free"), "\(fine.stdout)")
        #expect(asNobody().status == 0)

        _ = ChildProcessOutput.run("/bin/chown", ["root:root", db])
        let asRoot = try ctl(["check"], env)
        #expect(asRoot.status == 1)
        #expect(storageLine(asRoot.stdout).hasPrefix("FAIL") && storageLine(asRoot.stdout).contains("not writable by the folder's owner"), "\(asRoot.stdout)")
        let nobody = asNobody()
        #expect(
            nobody.status == 1 && storageLine(nobody.output).hasPrefix("FAIL") && storageLine(nobody.output).contains("may not write \(db)"), "\(nobody.output)"
        )

        let small = try ScratchMount(size: "8m", bind: false)
        defer { small.remove() }
        let smallEnv = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": small.base + "/weather.sqlite3"]
        #expect(try ctl(["migrate"], smallEnv).status == 0)
        let full = try ctl(["check"], smallEnv)
        #expect(
            full.status == 1 && storageLine(full.stdout).hasPrefix("FAIL") && storageLine(full.stdout).contains("MiB free, less than the 64 MiB"),
            "\(full.stdout)")

        // A writing command on a read-only file system says so, not only SQLite's "unable to
        // open database file" (error 14; an operator audit).
        let frozen = try ScratchMount(size: "8m")
        defer { frozen.remove() }
        let frozenEnv = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": frozen.dbDirectory + "/weather.sqlite3"]
        #expect(try ctl(["migrate"], frozenEnv).status == 0)
        try frozen.makeReadOnly()
        let prune = try ctl(["prune"], frozenEnv)
        #expect(prune.status == 1 && prune.stderr.contains("the file system is read-only"), "\(prune.status) \(prune.stderr)")
    }

    /// Root running weatherctl on the service user's database: the reading commands leave no
    /// `-writer` page behind, and a revoke makes it with the database's owner, as SQLite makes
    /// `-wal` and `-shm`. A page owned by root shut the workers out of the writers' queue, the
    /// grant cache and the shared provider pauses, silently.
    @Test(needs(isRoot, "needs root to run weatherctl as root on another user's database"))
    func weatherctlAsRootLeavesTheWriterPageToTheDatabasesOwner() throws {
        try requirePrivilege(isRoot, "root")
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-own-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let db = dir.appendingPathComponent("weather.sqlite3").path
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": db]
        let nobody = getpwnam("nobody").pointee.pw_uid
        func owner(_ path: String) -> uid_t? {
            var st = stat()
            return stat(path, &st) == 0 ? st.st_uid : nil
        }
        // A fresh install prepared as root: the database migrate creates belongs to the folder's
        // owner (the service's user), not to root, whose files left every write a 503.
        _ = ChildProcessOutput.run("/bin/chown", ["nobody:nogroup", dir.path])
        #expect(try ctl(["migrate"], env).status == 0)
        for suffix in ["", "-wal", "-shm", "-writer"] where FileManager.default.fileExists(atPath: db + suffix) {
            #expect(owner(db + suffix) == nobody, "weather.sqlite3\(suffix) is root's")
        }
        #expect(owner(db) == nobody)
        try? FileManager.default.removeItem(atPath: db + "-writer")

        for command in [["stats"], ["sessions", "list"], ["check"]] {
            let run = try ctl(command, env)
            #expect(run.status == 0, "\(command): \(run.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: db + "-writer"), "a reading command made the page")

        #expect(try ctl(["revoke", "aws_" + String(repeating: "a", count: 22)], env).status == 1)  // no such session; the page is made
        #expect(owner(db + "-writer") == nobody, "the page is root's")

        // The service user mends a page of its own made read-only (`chmod 0444`), as root does
        // (WriterLockTests): revocations stopped reaching the workers that held it (session 19).
        #expect(chmod(db + "-writer", 0o444) == 0)
        let asService = ChildProcessOutput.runData(
            "/usr/sbin/runuser",
            ["-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(db)", "\(binDirectory)/weatherctl", "revoke", "aws_" + String(repeating: "a", count: 22)])
        #expect(asService.status == 1)  // no such session
        var page = stat()
        #expect(stat(db + "-writer", &page) == 0 && page.st_mode & 0o200 != 0, "still read-only: \(String(page.st_mode & 0o777, radix: 8))")

        // A link planted in the folder (the service user's) leads root nowhere: a -writer page
        // that is a symbolic link to a file of root's is neither opened nor given away.
        let rootsFile = FileManager.default.temporaryDirectory.appendingPathComponent("cw-roots-\(UUID().uuidString.prefix(8))").path
        try "root's\n".write(toFile: rootsFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: rootsFile) }
        try FileManager.default.removeItem(atPath: db + "-writer")
        try FileManager.default.createSymbolicLink(atPath: db + "-writer", withDestinationPath: rootsFile)
        _ = try ctl(["revoke", "aws_" + String(repeating: "a", count: 22)], env)
        _ = try ctl(["migrate"], env)
        #expect(owner(rootsFile) == 0, "root's file was given away through the link")
        #expect(try String(contentsOfFile: rootsFile, encoding: .utf8) == "root's\n", "root's file was written through the link")

        // A file root cannot give away (immutable: even root's chown fails) is named, and the run
        // fails: the workers could not write it (it said nothing and exited 0).
        try FileManager.default.removeItem(atPath: db + "-writer")
        FileManager.default.createFile(atPath: db + "-writer", contents: Data(count: 4096))
        guard ChildProcessOutput.runData("/usr/bin/chattr", ["+i", db + "-writer"]).status == 0 else {
            print("weatherctlAsRootLeavesTheWriterPageToTheDatabasesOwner: the failed hand-over was not checked (chattr +i is refused on this file system)")
            return
        }
        defer { _ = ChildProcessOutput.runData("/usr/bin/chattr", ["-i", db + "-writer"]) }
        let stuck = try ctl(["migrate"], env)
        #expect(
            stuck.status == 1 && stuck.stderr.contains("could not give the database's -writer file to the folder's owner (uid \(nobody))")
                && !stuck.stderr.contains(db), "\(stuck.status) \(stuck.stderr)")
        #expect(stuck.stdout == "no pending migrations\n", "the migrations themselves are applied: \(stuck.stdout)")
    }

    /// The commands that only read work on a database this user may not write: a monitoring
    /// user, or a backup copy.
    @Test(needs(isRoot, "needs root to run as nobody"))
    func readingCommandsWorkOnADatabaseTheyCannotWrite() throws {
        try requirePrivilege(isRoot, "root, to run as nobody")
        let h = try GatewayHarness(workers: 1)
        let sid = try #require(try h.createSession()["anonymousSessionId"] as? String)
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ro-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // A backup in WAL mode, as `.backup` leaves it, with neither -wal nor -shm (SQLite would
        // create the -shm to read it, and nobody may write the folder: opened immutable), and
        // the same in rollback mode, as other backup tools leave it. A name URIs must escape.
        let walCopy = dir.appendingPathComponent("weather #1?.sqlite3").path
        let rollbackCopy = dir.appendingPathComponent("rollback.sqlite3").path
        for copy in [walCopy, rollbackCopy] {
            _ = ChildProcessOutput.run("/usr/bin/sqlite3", [h.databasePath, ".backup '\(copy)'"])
            chmod(copy, 0o644)
        }
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [rollbackCopy, "PRAGMA journal_mode=DELETE"])
        #expect(ChildProcessOutput.run("/usr/bin/sqlite3", [walCopy, "PRAGMA journal_mode"]).trimmingCharacters(in: .whitespacesAndNewlines) == "wal")
        chmod(dir.path, 0o755)  // root's folder and files: nobody reads, never writes
        /// weatherctl as nobody: exit status and output (stdout and stderr together).
        func asNobody(_ path: String, _ args: [String]) -> (status: Int32, output: String) {
            let out = ChildProcessOutput.runData(
                "/usr/sbin/runuser",
                [
                    "-u", "nobody", "--", "/usr/bin/env", "WEATHER_DB_PATH=\(path)",
                    "/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", "\(binDirectory)/weatherctl",
                ] + args)
            return (out.status, String(decoding: out.stdout, as: UTF8.self))
        }
        for copy in [walCopy, rollbackCopy] {
            for args in [["stats", "--hours", "1"], ["sessions", "list"], ["prune", "--dry-run"]] {
                let out = asNobody(copy, args)
                #expect(out.status == 0, "\(copy) \(args): \(out.output)")
            }
            let shown = asNobody(copy, ["sessions", "show", sid])
            #expect(shown.status == 0 && shown.output.contains(sid), "\(copy): \(shown.output)")
        }
        // `check` reads the journal mode from the copy's header (an immutable connection's
        // PRAGMA answers `delete`): wal for the WAL copy, delete for the other, named as such.
        let checked = asNobody(walCopy, ["check", "--json"])
        #expect(checked.output.contains(#""detail": "wal""#), "\(checked.output)")
        // Such a copy is checked for what it holds with --copy: its storage row does not fail on
        // a folder this user may not write, nor its key row on a key not beside it (they did, so
        // check could not validate a backup; session 17). Without --copy they fail, as for a
        // live database its user cannot write, and the detail points to --copy.
        #expect(checked.status == 1 && checked.output.contains("weatherctl check --copy"), "\(checked.output)")
        let asCopy = asNobody(walCopy, ["check", "--copy"])
        #expect(asCopy.status == 0 && asCopy.output.contains("not checked (--copy)") && asCopy.output.contains("keep hash.key with"), "\(asCopy.output)")
        // The service's own data folder (0700) is not "missing": the refusal says why.
        let privateFolder = dir.appendingPathComponent("private")
        try FileManager.default.createDirectory(at: privateFolder, withIntermediateDirectories: true)
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [h.databasePath, ".backup '\(privateFolder.path)/w.sqlite3'"])
        chmod(privateFolder.path, 0o700)
        let shut = asNobody(privateFolder.path + "/w.sqlite3", ["stats"])
        #expect(shut.status == 1 && shut.output.contains("permission denied on its folder; run weatherctl as the service user"), "\(shut.output)")
        let checkedRollback = asNobody(rollbackCopy, ["check"])
        #expect(checkedRollback.output.contains("journal_mode is delete"), "\(checkedRollback.output)")
        #expect(!FileManager.default.fileExists(atPath: walCopy + "-shm"))
        // With a -wal beside it, the file alone may not be all of the database: a clear refusal.
        FileManager.default.createFile(atPath: walCopy + "-wal", contents: Data())
        let refused = asNobody(walCopy, ["sessions", "list"])
        #expect(refused.status == 1)
        #expect(refused.output.contains("-shm") && refused.output.contains("service user"), "\(refused.output)")
        // Likewise through a symbolic link elsewhere: the -wal lies beside the file it points to.
        let link = dir.appendingPathComponent("elsewhere/link.sqlite3").path
        try FileManager.default.createDirectory(atPath: (link as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: walCopy)
        let throughLink = asNobody(link, ["sessions", "list"])
        #expect(throughLink.status == 1 && throughLink.output.contains("-shm"), "\(throughLink.output)")
    }

    @Test func migrateOnAFreshDatabaseReportsBothMigrationsThenNothing() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cw-ctl-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let env = ["PATH": "/usr/bin:/bin", "WEATHER_DB_PATH": dir.appendingPathComponent("fresh.sqlite3").path]

        // Before: every everyday command says the database is missing, on one line, exit 1.
        let missing = try ctl(["sessions", "list"], env)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("does not exist") && missing.stderr.contains("weatherctl migrate"))
        #expect(missing.stderr.split(separator: "\n").count == 1)
        // By its setting, not its path (API.md: no file path in an error or log line; the timer's
        // runs land in the journal). `weatherctl check` prints the paths.
        #expect(missing.stderr.contains("WEATHER_DB_PATH") && !missing.stderr.contains(dir.path), "\(missing.stderr)")
        #expect(missing.stdout.isEmpty)

        // A -wal without its database (deleted under running workers): migrate creates nothing
        // over it, and the everyday commands say what happened instead of "run migrate".
        let wal = dir.appendingPathComponent("fresh.sqlite3-wal").path
        FileManager.default.createFile(atPath: wal, contents: Data(count: 4096))
        let overWAL = try ctl(["migrate"], env)
        #expect(overWAL.status == 1 && overWAL.stderr.contains("missing but its -wal or -shm is still there"), "\(overWAL.stderr)")
        #expect(!FileManager.default.fileExists(atPath: env["WEATHER_DB_PATH"]!))
        let told = try ctl(["sessions", "list"], env)
        #expect(told.status == 1 && told.stderr.contains("deleted while workers ran") && !told.stderr.contains("run `weatherctl migrate`"), "\(told.stderr)")
        try FileManager.default.removeItem(atPath: wal)

        let first = try ctl(["migrate", "--json"], env)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(try first.json()["applied"] as? [String] == migrationFileNames)

        // Started afresh beside the -writer page of a database a worker found damaged: the new
        // file is not damaged, whatever inode number it gets (ext4 reuses one at once).
        let writer = env["WEATHER_DB_PATH"]! + "-writer"
        func damageWord() throws -> UInt64 {
            let page = try FileHandle(forReadingFrom: URL(fileURLWithPath: writer))
            defer { try? page.close() }
            try page.seek(toOffset: 256)
            return (try page.read(upToCount: 8) ?? Data()).reversed().reduce(0) { $0 << 8 | UInt64($1) }
        }
        let page = try FileHandle(forUpdating: URL(fileURLWithPath: writer))
        try page.seek(toOffset: 256)
        try page.write(contentsOf: withUnsafeBytes(of: UInt64(12_345).littleEndian) { Data($0) })
        try page.close()
        #expect(try damageWord() == 12_345)
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: env["WEATHER_DB_PATH"]! + suffix) }
        let afresh = try ctl(["migrate", "--json"], env)
        let afreshApplied = try afresh.json()["applied"] as? [String]
        #expect(afresh.status == 0 && afreshApplied == migrationFileNames, "\(afresh.stderr)")
        #expect(try damageWord() == 0)
        let second = try ctl(["migrate", "--json"], env)
        #expect(second.status == 0)
        #expect(try second.json()["applied"] as? [String] == [])
        let human = try ctl(["migrate"], env)
        #expect(human.status == 0)
        #expect(human.stdout == "no pending migrations\n")

        // An older release's database (a backup copy from before 0004): the reading commands
        // read it as it is and say so; a writing command still asks for migrate.
        _ = ChildProcessOutput.run("/usr/bin/sqlite3", [env["WEATHER_DB_PATH"]!, "DELETE FROM d1_migrations WHERE name LIKE '0004%'"])
        let older = try ctl(["stats", "--json"], env)
        #expect(older.status == 0 && older.stderr.contains("1 pending migration(s) (0004_") && older.stderr.contains("read as it is"), "\(older.stderr)")
        #expect(try older.json()["totals"] is [String: Any])
        #expect(try ctl(["sessions", "list"], env).status == 0)
        // As a backup copy it is sound (an upgrade drill: a backup-validation job failed after
        // every upgrade); as the live database it is not ready to serve.
        let olderCopy = try ctl(["check", "--copy"], env)
        #expect(olderCopy.status == 0 && olderCopy.stdout.contains("an older release's copy"), "\(olderCopy.stdout)")
        let olderLive = try ctl(["check"], env)
        #expect(olderLive.status == 1 && olderLive.stdout.contains("1 pending: 0004_"), "\(olderLive.stdout)")
        let write = try ctl(["prune"], env)
        #expect(write.status == 1 && write.stderr.contains("run `weatherctl migrate`"), "\(write.stderr)")
        #expect(try ctl(["migrate", "--json"], env).json()["applied"] as? [String] == migrationFileNames.filter { $0.hasPrefix("0004") })

        // A newer release applied a migration this one does not know: check fails and migrate
        // refuses, naming it, where both said all was applied.
        _ = ChildProcessOutput.run(
            "/usr/bin/sqlite3",
            [env["WEATHER_DB_PATH"]!, "INSERT INTO d1_migrations(name, applied_at) VALUES ('9999_from_the_future.sql', '2027-01-01 00:00:00')"])
        let check = try ctl(["check"], env)
        #expect(check.status == 1 && check.stdout.contains("9999_from_the_future.sql") && check.stdout.contains("newer release"), "\(check.stdout)")
        let newerCopy = try ctl(["check", "--copy"], env)
        #expect(newerCopy.status == 0 && newerCopy.stdout.contains("a newer release's copy"), "\(newerCopy.stdout)")
        let refused = try ctl(["migrate"], env)
        #expect(refused.status == 1 && refused.stderr.contains("9999_from_the_future.sql"), "\(refused.stderr)")
        // The gateway still serves such a database (a rolled-back build) but says so at start.
        let log = dir.appendingPathComponent("cgi.log").path
        let cgi = try ChildProcess(
            "\(binDirectory)/weather-fcgi", [],
            environment: env.merging(
                ["GATEWAY_INTERFACE": "CGI/1.1", "REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health", "WEATHER_HASH_KEY": String(repeating: "k", count: 32)]) {
                    $1
                },
            stderr: log)
        #expect(waitUntil { !cgi.isRunning })
        cgi.stop()
        #expect(cgi.terminationStatus == 0)
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(said.contains("1 migration(s) this build does not know (9999_from_the_future.sql)"), "\(said)")

        let noDirectory = try ctl(["migrate"], nowhere)
        #expect(noDirectory.status == 1)
        #expect(noDirectory.stderr.contains("database folder WEATHER_DB_PATH names does not exist"), "\(noDirectory.stderr)")
        #expect(!noDirectory.stderr.contains(nowhere["WEATHER_DB_PATH"] ?? "?"), "\(noDirectory.stderr)")
    }

    // MARK: sessions

    @Test func sessionsListAndShowRevealNoSecrets() throws {
        let h = try GatewayHarness(workers: 2)
        let installA = UUID().uuidString
        let installB = UUID().uuidString
        let a = try h.createSession(installationId: installA)
        let b = try h.createSession(installationId: installB)
        let idA = try #require(a["anonymousSessionId"] as? String)
        let idB = try #require(b["anonymousSessionId"] as? String)

        let list = try ctl(["sessions", "list", "--json"], h)
        #expect(list.status == 0, "\(list.stderr)")
        let sessions = try #require(try list.json()["sessions"] as? [[String: Any]])
        #expect(Set(sessions.compactMap { $0["id"] as? String }) == [idA, idB])
        #expect(sessions.allSatisfy { $0["status"] as? String == "active" && $0["platform"] as? String == "ios" })
        #expect(sessions.allSatisfy { ($0["createdAt"] as? String)?.hasSuffix("Z") == true })

        let humanList = try ctl(["sessions", "list"], h)
        #expect(humanList.status == 0)
        #expect(humanList.stdout.hasPrefix("ID "))
        #expect(humanList.stdout.contains(idA) && humanList.stdout.contains(idB))

        let show = try ctl(["sessions", "show", idA, "--json"], h)
        #expect(show.status == 0, "\(show.stderr)")
        let detail = try show.json()
        #expect(detail["id"] as? String == idA)
        #expect(detail["appVersion"] as? String == "1.0")
        #expect(detail["revokedAt"] is NSNull)
        let tokens = try #require(detail["tokens"] as? [String: [String: Int]])
        #expect(tokens["access"] == ["live": 1, "expired": 0, "revoked": 0])
        #expect(tokens["refresh"] == ["live": 1, "expired": 0, "revoked": 0])
        let humanShow = try ctl(["sessions", "show", idA], h)
        #expect(humanShow.status == 0)
        #expect(humanShow.stdout.contains("status") && humanShow.stdout.contains("active"))

        let onlyB = try ctl(["sessions", "list", "--installation-id", installB, "--json"], h)
        #expect(onlyB.status == 0, "\(onlyB.stderr)")
        #expect((try onlyB.json()["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [idB])
        // The same with the id on standard input (`-`), out of the shell's history.
        let fromStdin = try ctl(["sessions", "list", "--installation-id", "-", "--json"], h, stdin: installB + "\n")
        #expect((try fromStdin.json()["sessions"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [idB], "\(fromStdin.stderr)")
        let noStdin = try ctl(["sessions", "list", "--installation-id", "-"], h)
        #expect(noStdin.status == 64 && noStdin.stderr.contains("standard input"), "\(noStdin.stderr)")
        let emptyLine = try ctl(["revoke", "--installation-id", "-"], h, stdin: " \n")
        #expect(emptyLine.status == 64 && emptyLine.stderr.contains("standard input"), "\(emptyLine.stderr)")
        let revoked = try ctl(["sessions", "list", "--status", "revoked", "--json"], h)
        #expect(try revoked.json()["count"] as? Int == 0)
        let limited = try ctl(["sessions", "list", "--limit", "1", "--json"], h)
        #expect(try limited.json()["count"] as? Int == 1)

        // Nothing secret in any output: tokens, token hashes, installation ids or their full hashes, the key.
        var secrets = [installA, installB, installA.lowercased(), installB.lowercased()]
        for response in [a, b] {
            secrets += [response["weatherAccessToken"], response["refreshToken"]].compactMap { $0 as? String }
        }
        secrets += h.sql("SELECT token_hash FROM weather_session_tokens").split(separator: "\n").map(String.init)
        secrets += h.sql("SELECT installation_id_hash FROM anonymous_weather_sessions").split(separator: "\n").map(String.init)
        secrets.append(try String(contentsOfFile: keyFile(h), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        #expect(secrets.count == 15)  // 4 ids in two cases, 4 tokens, 4 token hashes, 2 installation hashes, the key
        for run in [list, humanList, show, humanShow, onlyB, revoked, limited] {
            for secret in secrets { #expect(!run.stdout.contains(secret) && !run.stderr.contains(secret)) }
        }

        let badId = try ctl(["sessions", "show", "not-a-session"], h)
        #expect(badId.status == 64)
        #expect(badId.stderr.contains("not a session id"))
        let unknown = try ctl(["sessions", "show", "aws_doesNotExist"], h)
        #expect(unknown.status == 1)
        #expect(unknown.stderr == "weatherctl: no session aws_doesNotExist\n")
        let badStatus = try ctl(["sessions", "list", "--status", "sleeping"], h)
        #expect(badStatus.status == 64)
    }

    // MARK: revoke

    @Test func revokeBySessionIdTakesEffectOnTheNextRequest() throws {
        let h = try GatewayHarness(workers: 2)
        let s = try h.createSession()
        let id = try #require(s["anonymousSessionId"] as? String)
        let access = try #require(s["weatherAccessToken"] as? String)
        let other = try #require(try h.createSession()["weatherAccessToken"] as? String)
        // No provider is configured, so an authenticated request gets 503; what matters is not 401.
        // Both workers keep the grant (requests at once until each has answered one).
        #expect(fromBothWorkers(h, token: access).allSatisfy { $0 == 503 })

        let revoke = try ctl(["revoke", id], h)
        #expect(revoke.status == 0, "\(revoke.stderr)")
        #expect(revoke.stdout == "revoked session \(id)\n")
        // Every worker, on its very next request: each had the grant kept.
        let after = fromBothWorkers(h, token: access)
        #expect(after.allSatisfy { $0 == 401 }, "\(after)")
        #expect(try weather(h, token: other) == 503)
        #expect(h.sql("SELECT status, revoked_at IS NOT NULL FROM anonymous_weather_sessions WHERE id = '\(id)'") == "revoked|1")
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE session_id = '\(id)' AND revoked_at IS NULL") == "0")

        let generation = try Data(contentsOf: URL(fileURLWithPath: h.databasePath + "-writer"))[56..<64]
        let again = try ctl(["revoke", id, "--json"], h)
        #expect(again.status == 0)
        #expect(try again.json()["alreadyRevoked"] as? [String] == [id])
        #expect(try again.json()["workersNotified"] as? Bool == true)
        // Revoking it again announces it again (how a revocation the workers missed reaches them).
        #expect(try Data(contentsOf: URL(fileURLWithPath: h.databasePath + "-writer"))[56..<64] != generation)
        let unknown = try ctl(["revoke", "aws_nobodyHere"], h)
        #expect(unknown.status == 1)
        #expect(unknown.stderr.contains("no session"))
        let neither = try ctl(["revoke"], h)
        #expect(neither.status == 64)
        let both = try ctl(["revoke", id, "--installation-id", UUID().uuidString], h)
        #expect(both.status == 64)
    }

    @Test func revokeByInstallationIdRevokesEverySessionOfThatInstallation() throws {
        let h = try GatewayHarness(workers: 2)
        let install = UUID().uuidString.lowercased()
        let first = try h.createSession(installationId: install)
        let second = try h.createSession(installationId: install.uppercased())
        let bystander = try h.createSession()
        let tokens = try [first, second].map { try #require($0["weatherAccessToken"] as? String) }
        let ids = try [first, second].map { try #require($0["anonymousSessionId"] as? String) }
        let bystanderToken = try #require(bystander["weatherAccessToken"] as? String)
        for t in tokens { #expect(try weather(h, token: t) == 503) }

        // Any case of the same UUID names the same installation.
        let run = try ctl(["revoke", "--installation-id", install.uppercased(), "--json"], h)
        #expect(run.status == 0, "\(run.stderr)")
        let report = try run.json()
        #expect(report["count"] as? Int == 2)
        #expect(Set(report["revoked"] as? [String] ?? []) == Set(ids))
        #expect(!run.stdout.contains(install) && !run.stdout.contains(install.uppercased()))
        for t in tokens { #expect(try weather(h, token: t) == 401) }
        #expect(try weather(h, token: bystanderToken) == 503)

        #expect(report["workersNotified"] as? Bool == true)
        let again = try ctl(["revoke", "--installation-id", "-"], h, stdin: "  \(install)  \n")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stdout.contains("no active session"))
        let third = try ctl(["revoke", "--installation-id", "-", "--json"], h, stdin: install)
        #expect(Set(try third.json()["alreadyRevoked"] as? [String] ?? []) == Set(ids), "\(third.stdout)")
        let bad = try ctl(["revoke", "--installation-id", "not-a-uuid"], h)
        #expect(bad.status == 64)
        // An id with no session at all fails, as an unknown session id does, and is not repeated.
        let stranger = UUID().uuidString.lowercased()
        let unknown = try ctl(["revoke", "--installation-id", stranger, "--json"], h)
        #expect(unknown.status == 1, "\(unknown.stdout)")
        #expect(unknown.stderr.contains("no session of that installation") && !unknown.stderr.contains(stranger), "\(unknown.stderr)")
        #expect(unknown.stdout.isEmpty)
    }

    // MARK: stats

    /// `stats` names the providers the workers are skipping right now (read from the page they
    /// share), with the pause's end and the failure that started it; none before a failure.
    @Test func statsShowsTheProvidersInAPause() throws {
        let fake = try FakeProviders()
        let legacy = "legacy-token-0123456789"
        let h = try GatewayHarness(workers: 2, env: fake.environment().merging(["CLOSET_WEATHER_PROXY_TOKEN": legacy]) { $1 })
        h.companions.append(fake)
        let before = try ctl(["stats", "--json"], h)
        let none = try before.json()["pausedProviders"] as? [Any]
        #expect(before.status == 0 && none?.isEmpty == true, "\(before.stdout)")
        #expect(!(try ctl(["stats"], h).stdout.contains("paused now")))

        try fake.setMode("caiyun", "rate_limited")  // 429 with Retry-After: 30
        try fake.setMode("visualcrossing", "rate_limited")
        #expect(try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": legacy]).status == 502)
        let started = Date()
        let json = try ctl(["stats", "--json"], h).json()
        let paused = try #require(json["pausedProviders"] as? [[String: Any]])
        #expect(paused.compactMap { $0["provider"] as? String } == ["caiyun", "visualcrossing"])
        for pause in paused {
            #expect(pause["failuresInARow"] as? Int == 1 && pause["lastFailure"] as? String == "http_status")
            #expect(pause["summary"] as? String == "provider answered HTTP 429")
            let until = try #require((pause["until"] as? String).flatMap { ISO8601DateFormatter().date(from: $0) })
            #expect(until > started.addingTimeInterval(20), "the provider's Retry-After of 30 s: \(until)")
        }
        let human = try ctl(["stats"], h).stdout
        #expect(human.contains("paused now: caiyun until ") && human.contains("(1 failure in a row; last: provider answered HTTP 429)"), "\(human)")
    }

    /// A `-writer` file holding another release's rate table (here: another slot count) is left
    /// to it: the service still limits, counting in the database, and says so at start, in
    /// `stats` and in `check` (it said nothing before, and every limited request was a write).
    @Test func aTableTheWorkersCannotUseIsSaidAtStartAndByStatsAndCheck() throws {
        let h = try GatewayHarness(workers: 1)
        h.stopApp()
        let fd = open(h.databasePath + "-writer", O_RDWR)
        var slots: UInt64 = 65_536
        #expect(fd >= 0 && pwrite(fd, &slots, 8, 4096 + 24) == 8)
        close(fd)
        try h.startApp(workers: 1)
        #expect(waitUntil { (try? h.request("GET", "/v1/health").status) == 200 })
        _ = try h.createSession()
        let said =
            "weather-fcgi: warning: rate buckets are counted in the database, a write for each take of a quota, not in the table the workers share: the -writer file beside the database holds another release's table"
        #expect(h.log.contains(said), "\(h.log)")
        #expect(h.sql("SELECT count(*) FROM weather_rate_limits") == "1", "the creation's quota, counted in the database")
        let buckets = try #require(try ctl(["stats", "--json"], h).json()["rateBuckets"] as? [String: Any])
        #expect(buckets["where"] as? String == "database" && (buckets["why"] as? String)?.contains("another release's table") == true, "\(buckets)")
        let check = try ctl(["check"], h)
        #expect(check.stdout.contains("rate buckets") && check.stdout.contains("in the database, a write for each take of a quota"), "\(check.stdout)")
    }

    /// `resume` ends a provider's pause for every worker at once: after it, the next uncached
    /// request calls the provider again instead of answering from the pause.
    @Test func resumeEndsAPauseForEveryWorker() throws {
        let fake = try FakeProviders()
        let legacy = "legacy-token-0123456789"
        let h = try GatewayHarness(workers: 2, env: fake.environment(providers: "caiyun").merging(["CLOSET_WEATHER_PROXY_TOKEN": legacy]) { $1 })
        h.companions.append(fake)
        let none = try ctl(["resume"], h)
        #expect(none.status == 0 && none.stdout == "no provider was paused\n", "\(none.stdout)\(none.stderr)")

        try fake.setMode("caiyun", "rate_limited")  // 429 with Retry-After: 30
        let auth = ["X-Weather-Token": legacy]
        #expect(try h.request("GET", "/v1/weather?lat=1&lon=1", headers: auth).status == 502)
        try fake.setMode("caiyun", "ok")
        let paused = try h.request("GET", "/v1/weather?lat=2&lon=2", headers: auth)
        #expect(paused.status == 502 && paused.headers["retry-after"] != nil, "answered from the pause")
        #expect(try fake.calls().count == 1)

        #expect(try ctl(["resume", "darksky"], h).status == 64)
        // A pasted installation id or key is not repeated (a secrets audit, session 30).
        let pasted = try ctl(["resume", "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"], h)
        #expect(pasted.status == 64 && pasted.stderr.contains("unknown provider") && !pasted.stderr.contains("0b6f1c4e"), "\(pasted.stderr)")
        let resumed = try ctl(["resume", "caiyun", "--json"], h)
        let list = try #require(try resumed.json()["resumed"] as? [[String: Any]])
        #expect(resumed.status == 0 && list.compactMap { $0["provider"] as? String } == ["caiyun"], "\(resumed.stdout)")
        #expect(!(try ctl(["stats"], h).stdout.contains("paused now")))
        for cell in ["lat=3&lon=3", "lat=4&lon=4"] {  // whichever worker answers
            #expect(try h.request("GET", "/v1/weather?\(cell)", headers: auth).status == 200)
        }
        #expect(try fake.calls().count == 3)
    }

    @Test func statsSplitsRequestsByAuthModeAndCountsRefusals() throws {
        let h = try GatewayHarness(workers: 2, env: ["CLOSET_WEATHER_PROXY_TOKEN": "legacy-token-0123456789"])
        let s = try h.createSession()
        let access = try #require(s["weatherAccessToken"] as? String)
        for _ in 0..<2 { #expect(try weather(h, token: access) == 503) }
        for _ in 0..<3 {
            let r = try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": "legacy-token-0123456789"])
            #expect(r.status == 503)
        }
        #expect(try h.request("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": "wrong-token-0123456789"]).status == 401)

        // Workers flush after the response has gone out, so give the last flush a moment.
        var totals: [String: Any] = [:]
        let settled = waitUntil {
            guard let run = try? ctl(["stats", "--json"], h), run.status == 0, let doc = try? run.json(),
                let t = doc["totals"] as? [String: Any], let requests = t["requests"] as? [String: Int]
            else { return false }
            totals = t
            return requests["weather_session"] == 2 && requests["weather_token"] == 3 && t["status401"] as? Int == 1
        }
        #expect(settled, "totals: \(totals)")
        #expect(totals["sessionsCreated"] as? Int == 1)
        #expect(totals["status429"] as? Int == 0)
        #expect(totals["unauthorized"] as? [String: Int] == ["legacy_token": 1], "the 401 by why")
        // No provider is configured: the five weather requests were 503s, counted by their code.
        #expect(totals["status5xx"] as? Int == 5)
        #expect(totals["serverErrors"] as? [String: Int] == ["provider_not_configured": 5])

        let json = try ctl(["stats", "--hours", "2", "--json"], h).json()
        #expect(json["granularity"] as? String == "hour")
        let periods = try #require(json["periods"] as? [[String: Any]])
        #expect(periods.count == 2)
        // The requests may straddle an hour boundary; the two hours together hold them all.
        #expect(periods.compactMap { ($0["requests"] as? [String: Int])?["weather_token"] }.reduce(0, +) == 3)
        for period in periods {
            #expect(period["limited"] is [String: Any])
            #expect((period["cache"] as? [String: Any])?["hitRatio"] != nil)
            #expect((period["start"] as? String)?.hasSuffix(":00:00Z") == true)
        }

        let days = try ctl(["stats", "--days", "7", "--json"], h).json()
        #expect((days["periods"] as? [Any])?.count == 7)
        #expect(((days["totals"] as? [String: Any])?["requests"] as? [String: Int])?["weather_session"] == 2)

        let human = try ctl(["stats"], h)
        #expect(human.status == 0)
        #expect(human.stdout.contains("WEATHER_SESSION") && human.stdout.contains("WEATHER_TOKEN"))
        let totalLine = try #require(human.stdout.split(separator: "\n").first { $0.hasPrefix("TOTAL") })
        #expect(totalLine.split(separator: " ").prefix(3) == ["TOTAL", "2", "3"])
        // Hits and misses themselves, not only their ratio (API.md: "cache hits/misses").
        #expect(human.stdout.contains("CACHE HITS") && human.stdout.contains("MISSES"))
        let cache = try #require(totals["cache"] as? [String: Any])
        let fields = totalLine.split(separator: " ").map(String.init)
        #expect(
            fields.count == 15 && fields[7] == "5" && fields[8] == "\(cache["hit"] as? Int ?? -1)" && fields[9] == "\(cache["miss"] as? Int ?? -1)",
            "\(fields) \(cache)")
        #expect(fields[10] == "\(cache["stale"] as? Int ?? -1)" && fields[11] == "\(cache["staleWhileRefreshing"] as? Int ?? -1)", "\(fields) \(cache)")
        #expect(human.stdout.split(separator: "\n").count == 1 + 24 + 1 + 2 + 1)
        #expect(
            human.stdout.contains("\n\nunauthorized (weather 401s by reason): legacy_token 1\n5xx by error code: provider_not_configured 5\nrate buckets: "),
            "\(human.stdout)")
        // Where the quotas were counted: the table the workers share, one bucket at least for
        // each of the creation's address, the session, the address's weather and its legacy
        // requests (leases may hold more of each), none forgotten.
        let buckets = try #require(json["rateBuckets"] as? [String: Any])
        #expect(
            buckets["where"] as? String == "sharedTable" && buckets["slots"] as? Int == 16_384 && buckets["forgottenForRoom"] as? Int == 0,
            "\(buckets)")
        #expect((buckets["live"] as? Int ?? 0) >= 4, "\(buckets)")
        let line = try #require(human.stdout.split(separator: "\n").last)
        #expect(
            line.hasPrefix("rate buckets: in the table the workers share beside the database (")
                && line.hasSuffix(" of 16384 slots live now; 0 buckets forgotten to make room since it was made)"), "\(line)")
        let check = try ctl(["check", "--json"], h).json()
        let row = try #require((check["checks"] as? [[String: Any]])?.first { $0["name"] as? String == "rate buckets" })
        #expect(row["ok"] as? Bool == true && (row["detail"] as? String)?.hasPrefix("in the table the workers share") == true, "\(row)")

        let both = try ctl(["stats", "--hours", "1", "--days", "1"], h)
        #expect(both.status == 64)
        let zero = try ctl(["stats", "--hours", "0"], h)
        #expect(zero.status == 64)
        #expect(zero.stderr.contains("--hours"))
    }

    // MARK: prune

    @Test func pruneKeepsLiveTokensAndRemovesExpiredOnes() throws {
        let h = try GatewayHarness(workers: 2)
        let live = try h.createSession()
        let access = try #require(live["weatherAccessToken"] as? String)
        let refreshed = try h.request(
            "POST", "/v1/weather/session/refresh",
            json: [
                "anonymousSessionId": try #require(live["anonymousSessionId"] as? String),
                "refreshToken": try #require(live["refreshToken"] as? String),
            ])
        #expect(refreshed.status == 200)
        _ = try h.createSession()
        // An expired token of a live session, a long-revoked session, and stale limiter/cache rows.
        sqlWrite(
            h,
            """
            INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at, created_at)
              SELECT 'wst_expired', id, 'deadbeef', 'access', '2020-01-01T00:00:00Z', '2019-12-31T12:00:00Z'
              FROM anonymous_weather_sessions LIMIT 1;
            INSERT INTO anonymous_weather_sessions VALUES ('aws_oldRevoked', 'ff', 'ios', NULL, 'revoked', '2020-01-01T00:00:00Z', '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z');
            INSERT INTO weather_session_tokens VALUES ('wst_oldRevoked', 'aws_oldRevoked', 'cafe', 'refresh', '2020-01-31T00:00:00Z', '2020-01-01T00:00:00Z', '2020-01-02T00:00:00Z');
            INSERT INTO weather_rate_limits VALUES ('ip:weather:192.0.2.9', 1000);
            INSERT INTO weather_cache(cache_key, body, fetched_at, fresh_until, stale_until) VALUES ('old', x'7b7d', 0, 0, 1);
            INSERT INTO weather_counters VALUES ('2020-01-01T00', 'auth.weather_session', 7);
            """)
        let liveTokens =
            "SELECT count(*) FROM weather_session_tokens t JOIN anonymous_weather_sessions s ON s.id = t.session_id WHERE s.status = 'active' AND t.revoked_at IS NULL AND t.expires_at > strftime('%Y-%m-%dT%H:%M:%SZ', 'now')"
        let allTokens = "SELECT count(*) FROM weather_session_tokens"
        let liveBefore = h.sql(liveTokens)
        // Two sessions, the first refreshed: its old access token lives on, its old refresh token is retired.
        #expect(liveBefore == "5")
        let allBefore = Int(h.sql(allTokens)) ?? 0

        let dry = try ctl(["prune", "--dry-run", "--json"], h)
        #expect(dry.status == 0, "\(dry.stderr)")
        let dryTables = try #require(try dry.json()["tables"] as? [String: Int])
        #expect(dryTables["weather_session_tokens"] == 2)
        #expect(dryTables["anonymous_weather_sessions"] == 1)
        #expect(Int(h.sql(allTokens)) == allBefore)

        let run = try ctl(["prune", "--json"], h)
        #expect(run.status == 0, "\(run.stderr)")
        let report = try run.json()
        #expect(report["dryRun"] as? Bool == false)
        let tables = try #require(report["tables"] as? [String: Int])
        #expect(tables["weather_session_tokens"] == 2)
        #expect(tables["anonymous_weather_sessions"] == 1)
        #expect(tables["weather_cache"] == 1)
        #expect((tables["weather_rate_limits"] ?? 0) >= 1)
        #expect(tables["weather_counters"] == 1)
        #expect(h.sql(liveTokens) == liveBefore)
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE id IN ('wst_expired', 'wst_oldRevoked')") == "0")
        #expect(h.sql("SELECT count(*) FROM anonymous_weather_sessions WHERE id = 'aws_oldRevoked'") == "0")
        // The rotated refresh token stays until it expires, so its reuse is still recognised.
        #expect(h.sql("SELECT count(*) FROM weather_session_tokens WHERE token_type = 'refresh' AND revoked_at IS NOT NULL") == "1")
        #expect(try weather(h, token: access) == 503)

        let human = try ctl(["prune"], h)
        #expect(human.status == 0)
        #expect(human.stdout.hasPrefix("TABLE"))
        #expect(human.stdout.contains("weather_session_tokens"))
    }

    // MARK: command line

    @Test func helpWorksForEveryCommand() throws {
        let commands: [[String]] = [
            [], ["migrate"], ["sessions"], ["sessions", "show"], ["sessions", "list"], ["revoke"], ["stats"], ["prune"], ["check"],
        ]
        for command in commands {
            for flag in ["--help", "-h"] {
                let run = try ctl(command + [flag], nowhere)
                #expect(run.status == 0, "\(command) \(flag): \(run.stderr)")
                #expect(run.stdout.contains("Usage: weatherctl"), "\(command)")
                #expect(run.stderr.isEmpty)
            }
            let viaHelp = try ctl(["help"] + command, nowhere)
            #expect(viaHelp.status == 0, "help \(command)")
            #expect(viaHelp.stdout.contains("Usage: weatherctl"))
        }
        // Help wins even over an otherwise wrong line.
        #expect(try ctl(["stats", "--hours", "nope", "--help"], nowhere).status == 0)
        let overview = try ctl(["--help"], nowhere).stdout
        for name in ["migrate", "sessions show", "sessions list", "revoke", "stats", "prune", "check"] {
            #expect(overview.contains(name))
        }
    }

    @Test func unknownCommandsAndBadArgumentsExit64WithOneLine() throws {
        let cases: [([String], String)] = [
            (["frobnicate"], "unknown command"),
            ([], "missing command"),
            (["sessions"], "needs a subcommand"),
            (["sessions", "drop"], "unknown subcommand"),
            (["sessions", "show"], "SESSION_ID"),
            (["sessions", "list", "--limit"], "needs a value"),
            (["sessions", "list", "--limit", "0"], "--limit"),
            (["prune", "--force"], "unknown option"),
            (["check", "extra"], "unexpected argument"),
            (["prune", "--dry-run=yes"], "takes no value"),
            (["sessions", "list", "--limit", "1", "--limit", "2"], "more than once"),
            (["prune", "--dry-run", "--dry-run"], "more than once"),
            (["sessions", "list", "--limit", "+3"], "--limit"),
            (["sessions", "show", "--", "-h"], "is not a session id"),
        ]
        for (args, message) in cases {
            let run = try ctl(args, nowhere)
            #expect(run.status == 64, "\(args): \(run.status) \(run.stderr)")
            #expect(run.stderr.hasPrefix("weatherctl: ") && run.stderr.contains(message), "\(args): \(run.stderr)")
            #expect(run.stderr.split(separator: "\n").count == 1, "\(args)")
            #expect(run.stdout.isEmpty)
        }
        // An installation id where a session id or nothing belongs is refused without being
        // repeated (the message reaches logs and scrollback).
        let installation = "0b6f1c4e-6f5a-4c0e-9d2b-2c1e8f3a7d11"
        for args in [["revoke", installation], ["sessions", "show", installation], ["sessions", "list", installation], ["x" + installation]] {
            let run = try ctl(args, nowhere)
            #expect(run.status == 64, "\(args.count) arguments: \(run.status)")
            #expect(!run.stderr.lowercased().contains(installation) && run.stderr.contains("--installation-id -"), "\(run.stderr.count) bytes")
        }
        // Nor is a token or a key pasted in the wrong place: messages reach the journal.
        let token = "wtr_" + String(repeating: "Q", count: 20) + "tokenTAIL0123456789abc"
        let key = "caiyunKEYtail0123456789"
        // A short legacy token (any length since session 35) as well.
        let short = "KEYtail1"
        for args in [
            ["revoke", "aws_x", token], ["sessions", "show", "wta_" + token.dropFirst(4)], ["revoke", key], ["check", key], [key], ["sessions", "show", short],
            ["check", short],
        ] {
            let run = try ctl(args, nowhere)
            #expect(run.status == 64, "\(args.count) arguments: \(run.status)")
            #expect(
                !run.stderr.contains("tokenTAIL") && !run.stderr.contains("KEYtail") && run.stderr.contains("not shown"),
                "\(run.stderr.count) bytes")
        }
        // A database that cannot be reached is a failure (1), not a usage error.
        for args in [["sessions", "list"], ["stats"], ["prune"], ["revoke", "aws_x"], ["sessions", "show", "aws_x"]] {
            let run = try ctl(args, nowhere)
            #expect(run.status == 1, "\(args)")
            #expect(run.stderr.contains("WEATHER_DB_PATH"))
            #expect(run.stderr.split(separator: "\n").count == 1)
        }
        let check = try ctl(["check"], nowhere)
        #expect(check.status == 1)
        #expect(check.stdout.contains("FAIL"))
        // A bad configuration is reported naming the variable.
        var badConfig = nowhere
        badConfig["WEATHER_GRID_DEGREES"] = "lots"
        let config = try ctl(["stats"], badConfig)
        #expect(config.status == 1)
        #expect(config.stderr.contains("WEATHER_GRID_DEGREES"))
    }
}
