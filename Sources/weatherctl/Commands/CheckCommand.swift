import WeatherAPI
import WeatherCore
import WeatherStore
#if canImport(Glibc)
import Glibc
#endif

/// `weatherctl check`: is this installation fit to serve? Each check prints ok or FAIL; any FAIL
/// makes the exit status 1. It never creates the database or the key file, and writes nothing but
/// the clearing of a damage mark on the `-writer` page once the file is found sound.
enum CheckCommand {
    static let spec = CommandSpec(
        name: "check",
        summary: "check configuration, hash key, database integrity, WAL and migrations",
        options: [OptionSpec(name: "--copy", value: nil, help: "the database is a backup copy: check what it holds, not whether workers could serve from it")],
        details: """
            Checks, in order: the configuration loads; WEATHER_DB_PATH is absolute, as the workers
            require (not with --copy); no value in the settings file holds what looks like a
            trailing comment, " #", which would be part of the value; no setting is given on two
            lines of the file (of which the last counts); which weather providers the workers will call
            (never a failure: none means the weather routes answer 503, Caiyun alone that trips
            further ahead than its 15 days answer 502; a warning names a provider key that
            WEATHER_PROVIDERS leaves out, which is never used); whether the legacy X-Weather-Token is
            accepted, and its quota (never a failure); the hash key is set (WEATHER_HASH_KEY) or its
            file beside the database exists, is readable, long enough and mode 0600 (not readable
            by group or others), or does not exist yet in a folder this user can write (the first
            worker creates it) while the database holds no session (with sessions stored a missing
            key fails: the workers refuse to start without it, INSTALL.md "A lost hash key"); the database, the files beside it and its folder are writable by
            this user (run as root: by the folder's owner, the service user) on a file system that
            is not read-only and has at least 64 MiB free; other users of the machine cannot read the
            database (its folder keeps them out, or its files give them nothing); the database exists and opens; the hash key is the one it
            records (where it holds sessions; see weatherctl adopt-hash-key); PRAGMA integrity_check is ok
            (and then, for the live database, the mark a worker leaves on the -writer page when it
            meets a damaged file, which makes every worker answer health 503, is cleared);
            journal_mode is wal (for a copy opened immutable, as its header records); the clean-up
            (weatherctl prune, or the workers') ran in the last three days or not yet (not with
            --copy); where the quotas' rate buckets are counted (never a failure; not with --copy:
            see weatherctl stats --help); no migration
            is pending, and none was applied by a newer release than this one. Exits 1 when any check fails. A copy this user may not write beside is read
            as `stats` reads it (see weatherctl stats --help). With --copy (a backup copy), the
            storage row is not checked, and a hash.key missing or unreadable beside the copy, and
            migrations the copy lacks or a newer release applied, are said, not failed: the exit
            status then tells whether the copy is sound. The last line (JSON: "version") names
            this program's release; `weather-fcgi --version` names the workers'.
            """,
        run: run)

    struct Result {
        var name: String
        var ok: Bool
        var detail: String
    }

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let results = checks(context, copy: args.has("--copy"))
        let allOK = results.allSatisfy(\.ok)
        var table = Table([("RESULT", .left), ("CHECK", .left), ("DETAIL", .left)])
        for r in results { table.append([r.ok ? "ok" : "FAIL", r.name, r.detail]) }
        context.emit(
            human: table.rendered + (allOK ? "all checks passed" : "\(results.filter { !$0.ok }.count) check(s) failed")
                + " (weatherctl \(BuildInfo.version))\n",
            json: .object([
                ("ok", .bool(allOK)),
                ("version", .string(BuildInfo.version)),
                ("checks", .array(results.map { .object([("name", .string($0.name)), ("ok", .bool($0.ok)), ("detail", .string($0.detail))]) })),
            ]))
        return allOK ? ExitCode.ok : ExitCode.failure
    }

    static func checks(_ context: CommandContext, copy: Bool = false) -> [Result] {
        var results: [Result] = []
        let config: GatewayConfig
        do {
            let file: String?, unreadable: [String]
            (config, file, unreadable) = try context.configAndFile(forReading: true)
            // The workers stop on such a file; run as the service user, so would they here. A
            // backup copy (`--copy`) needs only the database's path: a monitoring user outside the
            // settings folder's group (0750 on a VPS) validates it all the same (a re-review).
            guard unreadable.isEmpty || copy else {
                return [
                    Result(
                        name: "configuration", ok: false,
                        detail:
                            "\(unreadable.joined(separator: ", ")) cannot be read by this user (it, or its folder; check runs as the service user, and a worker that cannot read it stops)"
                    )
                ]
            }
            let passedOver = unreadable.isEmpty ? "" : "; \(unreadable.joined(separator: ", ")) passed over: this user cannot read it (--copy)"
            let source =
                (file.map { "from \($0) and the environment" }
                    ?? "from the environment alone (no file: WEATHER_CONFIG is unset and none of \(Bootstrap.defaultConfigPaths().joined(separator: ", ")) exists)")
                + passedOver
            var loaded = "loaded \(source); database \(config.databasePath)"
            let noticeSettings = config.settingsThePrivacyNoticeStates
            if !noticeSettings.isEmpty {
                loaded +=
                    "; warning: \(noticeSettings.joined(separator: ", ")) differ from what the shipped privacy notice states (htdocs/privacy.html: a 0.05° grid, 12-hour access and 30-day refresh tokens, weather cached 10 minutes and kept 6 hours for failures, a clean-up about daily): edit the notice to match (INSTALL.md, \"The privacy notice\")"
            }
            results.append(Result(name: "configuration", ok: true, detail: loaded))
            // Here it names a file of this shell's folder; the workers refuse it
            // (`Bootstrap.openStore`). A backup copy is only read from here: a relative path is fine.
            if !copy, !config.databasePath.hasPrefix("/") {
                results.append(
                    Result(
                        name: "database path", ok: false,
                        detail:
                            "WEATHER_DB_PATH is relative: the workers refuse it (their working folder is the web server's choice); give the absolute path (this check read it from the current folder; for a backup copy: weatherctl check --copy)"
                    ))
            }
            if !config.commentedSettings.isEmpty {
                results.append(Result(name: "comments", ok: false, detail: Bootstrap.commentedSettingsNotice(config.commentedSettings)))
            }
            if !config.repeatedSettings.isEmpty {
                results.append(Result(name: "repeated settings", ok: false, detail: Bootstrap.repeatedSettingsNotice(config.repeatedSettings)))
            }
        } catch {
            // Unlike a log line, check may name the file.
            let named =
                context.environment["WEATHER_CONFIG"].flatMap { $0.isEmpty ? nil : " (WEATHER_CONFIG is \($0))" }
                ?? " (the files looked for: \(Bootstrap.defaultConfigPaths().joined(separator: ", ")))"
            return [Result(name: "configuration", ok: false, detail: error.message + named)]
        }
        results.append(providers(config))
        results.append(legacyPath(config))

        let store: any OperatorStore
        do {
            store = try context.openStore(config, .readOnly)
        } catch {
            results.append(hashKey(config))
            results.append(storage(config))
            results.append(Result(name: "database", ok: false, detail: error.message))
            return results
        }
        // A backup copy (`--copy`) is checked for what it holds, not for serving: it failed on
        // "storage", and on a key file this user could not create beside it, every time. Only
        // when asked: the live database of a stopped service in a folder its user cannot write
        // opens the same way, and there the storage row must fail (a review found it passed).
        if copy {
            results.append(hashKey(config, besideACopy: true))
            results.append(Result(name: "storage", ok: true, detail: "not checked (--copy)"))
        } else {
            // With sessions stored a missing key is not created by the workers: they stop.
            results.append(hashKey(config, sessionsStored: (try? store.holdsAnySession()) ?? true))  // as the workers judge it
            var room = storage(config)
            if !room.ok && store.isReadOnlySnapshot { room.detail += " (for a backup copy: weatherctl check --copy)" }
            results.append(room)
            results.append(fileModes(config))
        }
        results.append(Result(name: "database", ok: true, detail: "opens"))
        func probe(_ name: String, _ body: () throws(StoreError) -> (Bool, String)) {
            do {
                let (ok, detail) = try body()
                results.append(Result(name: name, ok: ok, detail: detail))
            } catch {
                results.append(Result(name: name, ok: false, detail: error.message))
            }
        }
        probe("hash key record") { () throws(StoreError) in
            hashKeyRecord(config, recorded: try store.recordedHashKey(), sessionsStored: (try? store.holdsAnySession()) ?? true)
        }
        probe("integrity") { () throws(StoreError) in
            let answer = try store.integrityCheck()
            // A sound live file: the mark a worker left on meeting damage (health 503 on every
            // worker) goes, so a repair made in place, or a new file that got the damaged one's
            // inode number, answers health 200 again (a review).
            let cleared = answer == "ok" && !copy && store.clearDamageMark()
            return (
                answer == "ok",
                "integrity_check: \(answer.prefix(200))"
                    + (cleared
                        ? "; cleared the damage mark a worker had left (restart the service so that the workers that met the damage answer health 200 too)"
                        : "")
            )
        }
        probe("journal mode") { () throws(StoreError) in
            let mode = try store.journalMode()
            return (mode == "wal", mode == "wal" ? "wal" : "journal_mode is \(mode), not wal (start a worker or run weatherctl migrate)")
        }
        if !copy {
            probe("clean-up") { () throws(StoreError) in cleanUp(last: try store.lastCleanUp(), now: context.now, config: config) }
            // Never a failure: the database counts them too, a write for each.
            results.append(
                Result(
                    name: "rate buckets", ok: true,
                    detail: StatsCommand.said(store.rateBuckets(now: context.now), quotasOn: config.limits.anyRateBucket)))
        }
        // A backup copy made by another release is still a sound backup: said, not failed (a
        // backup-validation job failed after every upgrade; an upgrade drill).
        probe("migrations") { () throws(StoreError) in
            let unknown = try store.unknownMigrations()
            guard unknown.isEmpty else {
                let detail = "\(unknown.count) applied by a newer release: \(unknown.joined(separator: ", "))"
                return copy ? (true, "\(detail) (a newer release's copy)") : (false, "\(detail); use that release's weatherctl")
            }
            let pending = try store.pendingMigrations()
            guard !pending.isEmpty else { return (true, "all \(embeddedMigrations.count) applied") }
            let detail = "\(pending.count) pending: \(pending.joined(separator: ", "))"
            return copy
                ? (true, "\(detail) (an older release's copy: the workers apply them once it is restored)")
                : (false, "\(detail); run weatherctl migrate (before an upgrade's switch this is expected: INSTALL.md, \"Upgrading\")")
        }
        return results
    }

    /// When the clean-up last ran. It fails only when that was more than three days ago: then
    /// nothing runs it (no timer or cron, and `WEATHER_PRUNE_INTERVAL=0`, or no request reached
    /// a worker), and the privacy notice's deletions are not happening. Never run is fine: a new
    /// database, whose first worker runs it at its first response.
    static func cleanUp(last: Timestamp?, now: Timestamp, config: GatewayConfig) -> (Bool, String) {
        let workers =
            config.pruneInterval == 0
            ? "the workers never run it (WEATHER_PRUNE_INTERVAL=0)"
            : "the workers run it when none ran for \(config.pruneInterval) s"
        guard let last else { return (true, "not run yet; \(workers)") }
        let age = now.seconds - last.seconds
        guard age >= 0 else { return (true, "last run \(last.iso8601), after this clock's now (was the clock set back?); \(workers)") }
        let ago = age >= 86_400 ? "\(age / 86_400) day(s) ago" : age >= 3600 ? "\(age / 3600) h ago" : "\(max(age, 0) / 60) min ago"
        guard age <= 3 * 86_400 else {
            return (false, "last run \(last.iso8601), \(ago): nothing runs it (is the prune timer or cron running?); \(workers)")
        }
        return (true, "last run \(last.iso8601), \(ago); \(workers)")
    }

    /// The providers the workers will call, and what the choice cannot serve. Informational:
    /// sessions and the legacy token work without any. A key whose provider `WEATHER_PROVIDERS`
    /// leaves out is never used, which is said as a warning (leaving one out for a while is
    /// a fair thing to do; a key set for nothing, or a list that lost a name, is not).
    static func providers(_ config: GatewayConfig) -> Result {
        let names = config.configuredProviders
        let leftOut = config.keyedProvidersLeftOut
        var detail =
            switch names {
            case [] where !leftOut.isEmpty: "none of WEATHER_PROVIDERS has a key: the weather routes answer 503 provider_not_configured"
            case []: "none configured: the weather routes answer 503 provider_not_configured (set CAIYUN_API_TOKEN and/or VISUAL_CROSSING_API_KEY)"
            case ["caiyun"]: "caiyun only: trips ending more than about 14 days ahead answer 502 (VISUAL_CROSSING_API_KEY serves them)"
            default: names.joined(separator: ", ") + (names.count > 1 ? " (in this order)" : "")
            }
        for name in leftOut {
            let key = GatewayConfig.providerKeyVariables[name] ?? name
            detail +=
                "; warning: \(key) is set, but WEATHER_PROVIDERS (\(config.providers.joined(separator: ","))) leaves out \(name), so that key is never used"
                + " (add \(name) to WEATHER_PROVIDERS, or unset \(key))"
        }
        for variable in config.providerKeysInClearText {
            detail += "; warning: " + Bootstrap.clearTextKeyNotice(variable)
        }
        return Result(name: "providers", ok: true, detail: detail)
    }

    /// Whether old app builds' `X-Weather-Token` is accepted. Informational: turning the path off
    /// is the end of the migration (`weatherctl stats` shows who still uses it, and afterwards
    /// the 401s it causes as `legacy_off`).
    static func legacyPath(_ config: GatewayConfig) -> Result {
        let quota = config.limits.legacyRequestsPerIPPerHour
        var detail =
            config.legacyToken == nil
            ? "off (CLOSET_WEATHER_PROXY_TOKEN unset): old app builds' X-Weather-Token gets 401, counted as unauthorized legacy_off in weatherctl stats"
            : "on: X-Weather-Token accepted on the weather routes, "
                + (quota == 0 ? "without a quota (WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR=0)" : "\(quota) requests per client address per hour")
        if config.legacyTokenIsShort { detail += "; warning: " + Bootstrap.shortLegacyTokenNotice }
        return Result(name: "legacy token", ok: true, detail: detail)
    }

    /// The key workers hash installation ids with: set in the configuration, or a private file.
    /// `besideACopy`: the database is a backup copy read by a user who may not write beside it;
    /// a key missing there, or one this user may not read, is said, not failed (only a key
    /// readable by others is a fault wherever it lies).
    static func hashKey(_ config: GatewayConfig, besideACopy: Bool = false, sessionsStored: Bool = false) -> Result {
        let name = "hash key"
        if config.hashKey != nil { return Result(name: name, ok: true, detail: "WEATHER_HASH_KEY is set") }
        let path = config.hashKeyFile
        var st = stat()
        guard stat(path, &st) == 0 else {
            // A folder this user may not enter is not a missing key (an operator audit: check
            // said "does not exist" of the live key in the service's 0700 folder).
            if errno == EACCES {
                return Result(
                    name: name, ok: besideACopy,
                    detail: "\(path) cannot be looked at by this user (uid \(geteuid())): permission denied on its folder; run check as the service user")
            }
            if besideACopy {
                return Result(name: name, ok: true, detail: "\(path) is not beside this copy: keep hash.key with the database's backups (INSTALL.md)")
            }
            // Before the first start there is no key yet, and that is fine as long as a worker
            // running as this user (check runs as the service user) will be able to create it.
            // Not once sessions are stored: the workers refuse to make another key then.
            guard !sessionsStored else {
                return Result(
                    name: name, ok: false,
                    detail:
                        "\(path) is missing, but the database holds sessions hashed with it: restore it from a backup (INSTALL.md, \"A lost hash key\"); the workers will not start without it"
                )
            }
            let folder = config.databaseFolder
            guard access(folder.isEmpty ? "." : folder, W_OK | X_OK) == 0 else {
                return Result(name: name, ok: false, detail: "\(path) does not exist and this user cannot create it there (or set WEATHER_HASH_KEY)")
            }
            return Result(name: name, ok: true, detail: "\(path) not created yet: the first worker creates it (0600)")
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else { return Result(name: name, ok: false, detail: "\(path) is not a regular file") }
        let mode = st.st_mode & 0o777
        guard mode & 0o077 == 0 else {
            return Result(name: name, ok: false, detail: "\(path) has mode \(octal(mode)), readable by others; run chmod 600 \(path)")
        }
        guard let text = Bootstrap.readFile(path) else {
            return Result(
                name: name, ok: besideACopy, detail: "\(path) cannot be read by this user" + (besideACopy ? " (it is there, mode \(octal(mode)))" : ""))
        }
        // Read as the workers read it (they refuse to start on a key they find too short).
        guard Bootstrap.hashKey(fromFileText: text) != nil else {
            return Result(name: name, ok: false, detail: "\(path) is empty or shorter than 32 characters")
        }
        return Result(name: name, ok: true, detail: "\(path) mode \(octal(mode))")
    }

    /// Whether the key the workers would use is the one the database records (migration 0007):
    /// where it holds sessions, workers on another key refuse to start (`Bootstrap.verifyHashKey`),
    /// and so does this row fail, for the live database and a backup copy alike. A key that
    /// cannot be read here is the "hash key" row's to say.
    static func hashKeyRecord(_ config: GatewayConfig, recorded: (fingerprint: String, recordedAt: Timestamp)?, sessionsStored: Bool) -> (Bool, String) {
        guard let recorded else {
            return (
                true,
                sessionsStored
                    ? "none recorded yet: the next worker to start records its key; the database holds sessions made before it kept a record, so nothing checks that the key is theirs (a backup restored from before this release: restore its own hash.key with it)"
                    : "none recorded yet: the next worker to start records its key"
            )
        }
        let key = config.hashKey.map { Array($0.utf8) } ?? Bootstrap.readFile(config.hashKeyFile).flatMap(Bootstrap.hashKey(fromFileText:))
        guard let key else { return (true, "a key was recorded \(recorded.recordedAt.iso8601); the present one cannot be read here to compare") }
        if Bootstrap.fingerprint(ofHashKey: key) == recorded.fingerprint { return (true, "the key is the one recorded \(recorded.recordedAt.iso8601)") }
        guard sessionsStored else {
            return (true, "another key was recorded \(recorded.recordedAt.iso8601), but no session is stored: the next worker records this one")
        }
        return (false, Bootstrap.hashKeyMismatch)
    }

    /// Whether other users of the machine can read the database: its folder lets them in (o+x)
    /// and a file of it is readable by them (o+r). The workers create the files without
    /// permissions for others since session 18, but files made before keep their modes, 0644
    /// under a shell's umask (an upgrade audit). The sessions' rows and the hashes are the
    /// service's alone.
    static func fileModes(_ config: GatewayConfig) -> Result {
        let name = "file modes"
        let folder = config.databaseFolder.isEmpty ? "." : config.databaseFolder
        var dir = stat()
        guard stat(folder, &dir) == 0 else { return Result(name: name, ok: true, detail: "not checked (\(folder): \(String(cString: strerror(errno))))") }
        let files = ["", "-wal", "-shm", "-writer"].map { config.databasePath + $0 }
        let readable = files.filter { path in
            var st = stat()
            return stat(path, &st) == 0 && st.st_mode & 0o004 != 0
        }
        guard dir.st_mode & 0o001 != 0, !readable.isEmpty else {
            return Result(name: name, ok: true, detail: "the database is not readable by other users")
        }
        return Result(
            name: name, ok: false,
            detail: "other users may read \(readable.joined(separator: ", ")) (its folder lets them in); run chmod o-rwx on them, or on the folder")
    }

    /// Less free space than this fails `storage`: the WAL alone may grow to 64 MiB before a
    /// checkpoint starts it over (docs/decisions.md, "Checkpoints after the response").
    static let leastFreeBytes: UInt64 = 64 << 20

    /// Whether the workers will be able to write: the database, the files SQLite keeps beside it
    /// and its folder are writable by the service user on a file system that is neither
    /// read-only nor nearly full. Run as the service user (INSTALL.md), this user's access is the
    /// workers'; run as root, who may write anything, each file must be writable by the folder's
    /// owner, who is the service user (`weatherctl migrate` gives the files to it). A disk that
    /// fills or turns read-only later shows in the log: `storage_error=` on each 503.
    static func storage(_ config: GatewayConfig) -> Result {
        let name = "storage"
        let folder = config.databaseFolder.isEmpty ? "." : config.databaseFolder
        var dir = stat()
        guard stat(folder, &dir) == 0 else { return Result(name: name, ok: false, detail: "\(folder): \(String(cString: strerror(errno)))") }
        let asRoot = geteuid() == 0
        var readOnlyFileSystem = false, refused: [String] = []
        for (path, what) in [(folder, W_OK | X_OK), (config.databasePath, W_OK), (config.databasePath + "-wal", W_OK), (config.databasePath + "-shm", W_OK)] {
            var st = stat()
            guard stat(path, &st) == 0 else { continue }
            if access(path, what) != 0 {
                if errno == EROFS { readOnlyFileSystem = true } else { refused.append(path) }
                continue
            }
            let mode = st.st_mode
            if asRoot && !(st.st_uid == dir.st_uid && mode & 0o200 != 0) && !(st.st_gid == dir.st_gid && mode & 0o020 != 0) && mode & 0o002 == 0 {
                refused.append(path)
            }
        }
        var problems: [String] = []
        if readOnlyFileSystem { problems.append("the file system is read-only") }
        if !refused.isEmpty {
            problems.append(
                asRoot
                    ? "not writable by the folder's owner, uid \(dir.st_uid), the service user: \(refused.joined(separator: ", ")) (run weatherctl migrate as root, which gives them to it, or chown them)"
                    : "this user, uid \(geteuid()), may not write \(refused.joined(separator: ", ")) (check runs as the service user; weatherctl migrate as root gives the files to the folder's owner)"
            )
        }
        var fs = statvfs()
        let free: UInt64? = statvfs(folder, &fs) == 0 ? UInt64(fs.f_bavail) * UInt64(fs.f_frsize) : nil
        let freeText = free.map { "\($0 >> 20) MiB free" } ?? "free space unknown"
        if let free, free < leastFreeBytes {
            problems.append("\(freeText), less than the \(leastFreeBytes >> 20) MiB the WAL may need")
        }
        guard problems.isEmpty else {
            return Result(name: name, ok: false, detail: problems.joined(separator: "; ") + "; writes would fail with 503 storage_unavailable")
        }
        return Result(name: name, ok: true, detail: "writable by \(asRoot ? "the folder's owner, uid \(dir.st_uid)" : "this user"); \(freeText)")
    }

    static func octal(_ mode: mode_t) -> String {
        let digits = String(mode, radix: 8)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
