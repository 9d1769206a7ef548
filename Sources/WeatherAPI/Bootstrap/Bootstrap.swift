import WeatherCore
import WeatherCrypto
import WeatherStore
#if canImport(Glibc)
import Glibc
#endif

/// Start-up shared by `weather-fcgi` and `weatherctl`: configuration, hash key, database.
/// Any failure is a `StartupError` whose message names what to fix; nothing starts half-configured.
public enum Bootstrap {
    /// The process environment as a dictionary.
    public static func processEnvironment() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let text = String(cString: entry)
            if let eq = text.firstIndex(of: "=") { out[String(text[..<eq])] = String(text[text.index(after: eq)...]) }
            p += 1
        }
        return out
    }

    /// Environment first, then the `KEY=VALUE` file named by `WEATHER_CONFIG`, or else the first
    /// that exists of `/etc/closet-weather/weather.conf` and, for shared hosts where the web
    /// server cannot set the environment, `<folder of the executable>/../closet-weather-data/weather.conf`
    /// (a sibling of the document root, so never served). Only known names are read from the
    /// environment, so unrelated variables cannot leak in.
    public static func loadConfig(environment: [String: String] = processEnvironment()) throws -> GatewayConfig {
        try loadConfigAndSource(environment: environment).config
    }

    /// What start-up errors call each configuration file: its role, never its path (API.md: no
    /// file path in any log line; `weatherctl check` prints the path).
    static let configFileRoles = [
        "the file WEATHER_CONFIG names", "the default configuration file",
        "the configuration file in closet-weather-data beside the program's folder",
    ]

    /// `loadConfig`, the file it read (nil: the environment alone), and whether that file was the
    /// one beside the program (the shared hosting layout, see `denyWebAccess(toFoldersOf:)`).
    /// A default file that exists but cannot be read stops the gateway (`strict`); weatherctl,
    /// which a monitoring user may run on a backup copy without the service's settings, passes
    /// over it, and gets its path in `unreadable`.
    public static func loadConfigAndSource(environment: [String: String] = processEnvironment(), strict: Bool = true) throws
        -> (config: GatewayConfig, file: String?, besideProgram: String?, unreadable: [String])
    {
        let relevant = environment.filter { ConfigLoader.knownVariables.contains($0.key) || $0.key.hasPrefix("WEATHER_") }
        var settings: [String: String] = [:]
        var read: String?, besideProgram: String?
        var unreadable: [String] = []
        var commented: [String] = [], repeated: [ConfigLoader.RepeatedSetting] = []
        // A file's error says which file: the settings may come from one of several places.
        func parse(_ text: String, role: String) throws -> [String: String] {
            do {
                let parsed = try ConfigLoader.readSettingsFile(text)
                commented = parsed.commented.filter { relevant[$0] == nil }
                repeated = parsed.repeated.filter { relevant[$0.name] == nil }
                return parsed.values
            } catch {
                throw ConfigError(variable: "\(role), \(error.variable),", problem: error.problem)
            }
        }
        if let path = environment["WEATHER_CONFIG"], !path.isEmpty {
            guard let text = readFile(path) else {
                throw StartupError("\(configFileRoles[0]) cannot be read: \(String(cString: strerror(errno))) (weatherctl check prints its path)")
            }
            settings = try parse(text, role: configFileRoles[0])
            read = path
        } else {
            // The first default file that exists. One there but unreadable (its mode, its owner)
            // is an error: passed over, the settings silently fell back to the defaults and the
            // next error blamed something else (the database folder).
            for (index, path) in defaultConfigPaths().enumerated() {
                var st = stat()
                // Missing: the next place. A folder this user may not enter (a settings folder of
                // mode 0700 or 0750) hides a file that may well be there: not missing.
                if stat(path, &st) != 0 && (errno == ENOENT || errno == ENOTDIR) { continue }
                guard let text = readFile(path) else {
                    guard strict else {
                        unreadable.append(path)
                        continue
                    }
                    throw StartupError(
                        "\(configFileRoles[index + 1]) cannot be read by this user: \(String(cString: strerror(errno))) (weatherctl check prints its path)")
                }
                settings = try parse(text, role: configFileRoles[index + 1])
                read = path
                if index > 0 { besideProgram = path }
                break
            }
        }
        // `CLOSET_WEATHER_PROXY_TOKEN= # retired` turned the legacy path on with the note as its
        // token (a security re-audit): an unquoted file value that is only a note is refused,
        // which loses nothing. A token that starts with # is still taken from the environment
        // or in quotes (one fixed in shipped app builds may).
        if commented.contains("CLOSET_WEATHER_PROXY_TOKEN"), settings["CLOSET_WEATHER_PROXY_TOKEN"]?.hasPrefix("#") == true {
            throw ConfigError(
                variable: "CLOSET_WEATHER_PROXY_TOKEN",
                problem: "is a comment in the settings file (to turn the legacy path off, leave it empty; a token that starts with # goes in quotes)")
        }
        var config = try ConfigLoader.load(environment: relevant, file: settings, commented: commented)
        config.commentedSettings = commented
        config.repeatedSettings = repeated
        return (config, read, besideProgram, unreadable)
    }

    /// What to say of `repeatedSettings` (a start-up log line, `weatherctl check`): names and
    /// line numbers only.
    public static func repeatedSettingsNotice(_ settings: [ConfigLoader.RepeatedSetting]) -> String {
        "the settings file gives \(settings.map(\.description).joined(separator: ", ")) on more than one line: the last line's value is used; keep one line for each setting"
    }

    /// What to say of `commentedSettings` (a start-up log line, `weatherctl check`): names only.
    public static func commentedSettingsNotice(_ names: [String]) -> String {
        "the settings file's \(names.joined(separator: ", ")) hold\(names.count == 1 ? "s" : "") \" #\" or start\(names.count == 1 ? "s" : "") with \"#\": "
            + "everything after = is the value, that text included (a token, a key or a path then has it in it); "
            + "if it is meant as a comment, move it to a line of its own, knowing that the value then changes "
            + "(WEATHER_DB_PATH would name another file, WEATHER_HASH_KEY be another key); to keep the value, put it in quotes"
    }

    /// What `denyWebAccess(toFoldersOf:)` writes: Apache 2.4's rule, and 2.2's where 2.4's module is missing.
    static let denyEverything = """
        # Written by weather.fcgi (closet weather gateway). This folder holds its settings, hash key
        # and database, and must lie outside every document root (INSTALL.md, "On shared hosting").
        # Should a web server reach it anyway, it refuses everything here.
        <IfModule mod_authz_core.c>
            Require all denied
        </IfModule>
        <IfModule !mod_authz_core.c>
            Order allow,deny
            Deny from all
        </IfModule>

        """

    /// Files the programs create (the database, its `-wal`, `-shm` and `-writer`; `weatherctl
    /// migrate`'s new database) are never readable or writable by others, whatever umask they
    /// were started with (a shell's 022 made them 0644 outside systemd, whose unit sets 0077):
    /// the umask only ever gains 027. Group write goes too: every writer runs as the service
    /// user (INSTALL.md).
    public static func restrictFileCreation() {
        let current = umask(0o027)
        umask(current | 0o027)
    }

    /// What the workers and `weatherctl check` say of a legacy token under 16 characters.
    public static let shortLegacyTokenNotice =
        "CLOSET_WEATHER_PROXY_TOKEN is shorter than 16 characters, so it can be guessed by trying (wrong tokens are answered 401 without a quota); accepted because app builds already shipped send it: retire the legacy path (unset the token) once those builds are gone"

    /// What the workers say at start, and `weatherctl check` warns, for a provider whose key
    /// would travel in clear text (`GatewayConfig.providerKeysInClearText`).
    public static func clearTextKeyNotice(_ variable: String) -> String {
        "\(variable) is plain http:// to a host other than this machine, so the provider's key travels unencrypted; use https:// (or a proxy on this machine)"
    }

    /// No core file, whatever the launch path's limit (session 30, a secrets audit: only the
    /// systemd unit set `LimitCORE=0`; spawn-fcgi, mod_fcgid and plain CGI kept the host's, and a
    /// worker's memory holds the provider keys, the legacy token, the hash key and the tokens,
    /// installation ids and coordinates of the requests in hand). Soft and hard limit both 0, so
    /// nothing the process starts can raise it again; a crash handler on a pipe
    /// (`systemd-coredump`, apport) reads the limit and keeps nothing either.
    public static func forbidCoreDumps() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
    }

    /// Writes an `.htaccess` refusing every request into the folder of each of `files` that has none. For the
    /// shared-hosting layout only (settings found beside the program): the data folder belongs
    /// beside the document root, but a sub-domain whose root the host puts inside `public_html`,
    /// or the program uploaded into a sub-folder, puts it inside one, where Apache would serve the
    /// provider keys and the database. Best effort: an existing file is left as it is (the
    /// operator's), and a folder that cannot be written is skipped; nginx ignores the file.
    /// Only absolute paths (weather-fcgi refuses a relative database path before it calls this),
    /// and never the program's own folder: a database beside the program would otherwise shut
    /// the API itself off (that folder's own `.htaccess` refuses database files).
    public static func denyWebAccess(toFoldersOf files: [String]) {
        let program = programFolder()
        for folder in Set(files.filter { $0.hasPrefix("/") }.map(folder(of:))) where folder != program {
            let fd = open(folder + "/.htaccess", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644)
            guard fd >= 0 else { continue }
            fchmod(fd, 0o644)  // the web server, maybe another user, must read it; the umask keeps others out of the rest
            let written = denyEverything.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, denyEverything.utf8.count) }
            close(fd)
            if written != denyEverything.utf8.count { unlink(folder + "/.htaccess") }
        }
    }

    /// The folder of a file path (`.` for a bare name).
    static func folder(of path: String) -> String {
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return "." }
        return slash == path.utf8.startIndex ? "/" : String(path[..<slash])
    }

    /// Where configuration is looked for when `WEATHER_CONFIG` is unset, in order.
    public static func defaultConfigPaths() -> [String] {
        var paths = [GatewayConfig.defaultConfigPath]
        if let dir = programFolder() { paths.append(dir + "/../closet-weather-data/weather.conf") }
        return paths
    }

    /// The folder of the running executable (`/proc/self/exe`), nil when it cannot be read.
    static func programFolder() -> String? {
        var buf = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/self/exe", &buf, buf.count - 1)
        guard n > 0 else { return nil }
        let exe = String(decoding: buf[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return exe.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
    }

    /// How start-up errors name the key file. They name settings, never paths: API.md allows no
    /// file path in any log line, and these go to the log. `weatherctl check` prints the paths.
    static let hashKeyFileName = "hash.key beside the database of WEATHER_DB_PATH"

    /// The hash key: `WEATHER_HASH_KEY`, or the key file beside the database, created once (0600)
    /// with 256 random bits when missing, and then said through `created`. A key file others can
    /// read is refused, and so is a missing one where `sessionsStored` says the database already
    /// holds sessions: they were hashed with a key (installation ids, refresh retries), and a
    /// worker that made a new one would disagree with the workers still holding the old one (an
    /// incident drill: a deleted `hash.key`, a worker restarted, and an idempotent refresh retry
    /// answered by the other worker revoked the session as a replay).
    public static func hashKey(for config: GatewayConfig, sessionsStored: () -> Bool, created: () -> Void = {}) throws -> [UInt8] {
        if let key = config.hashKey { return Array(key.utf8) }
        let path = config.hashKeyFile
        var st = stat()
        if stat(path, &st) != 0 {
            let missing = errno == ENOENT, why = String(cString: strerror(errno))  // before SQLite runs
            guard missing, !sessionsStored() else {
                throw StartupError(
                    missing
                        ? "the hash key file (\(Self.hashKeyFileName)) is missing, but the database holds sessions hashed with it: restore it from a backup and restart every worker (INSTALL.md, \"A lost hash key\")"
                        : "cannot read the hash key file (\(Self.hashKeyFileName)): \(why)")
            }
            // Written whole to a file of this process's own, then linked into place: the file
            // appears with its key or not at all. Created in place and written after, a worker
            // killed in between (or a full disk) left an empty `hash.key`, and every later start
            // stopped on it until an operator deleted it (a token-lifecycle audit, session 30).
            // A file system without hard links (some shared hosts' network mounts) gets it in
            // place, as before.
            let hex = Hex.encode(try SecureRandom.bytes(32)) + "\n"
            func writeKey(to file: String) throws -> Bool {
                let fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0o600)
                guard fd >= 0 else {
                    if errno == EEXIST, file == path { return false }  // another worker's, at the same moment
                    throw StartupError("cannot create the hash key file (\(Self.hashKeyFileName)): \(String(cString: strerror(errno)))")
                }
                let ok = hex.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, hex.utf8.count) } == hex.utf8.count && fsync(fd) == 0
                close(fd)
                guard ok else {
                    if file != path { unlink(file) }
                    throw StartupError("cannot write the hash key file (\(Self.hashKeyFileName))")
                }
                return true
            }
            let temporary = (config.databaseFolder.isEmpty ? "." : config.databaseFolder) + "/.hash.key.new-\(getpid())"
            unlink(temporary)  // a leftover of an earlier process with this pid
            _ = try writeKey(to: temporary)
            let linked = link(temporary, path) == 0, linkError = errno
            unlink(temporary)
            if linked {
                created()
            } else if linkError == EPERM || linkError == EOPNOTSUPP || linkError == ENOTSUP {
                if try writeKey(to: path) { created() }
            } else if linkError != EEXIST {
                throw StartupError("cannot create the hash key file (\(Self.hashKeyFileName)): \(String(cString: strerror(linkError)))")
            }
            // EEXIST: another worker created it at the same moment; read theirs.
        }
        guard stat(path, &st) == 0 else { throw StartupError("cannot read the hash key file (\(Self.hashKeyFileName))") }
        guard st.st_mode & S_IFMT == S_IFREG else { throw StartupError("the hash key file (\(Self.hashKeyFileName)) is not a regular file") }
        guard st.st_mode & 0o077 == 0 else {
            throw StartupError("the hash key file (\(Self.hashKeyFileName)) is readable by others; run chmod 600 on it")
        }
        for _ in 0..<50 {
            if let text = readFile(path), let key = hashKey(fromFileText: text) { return key }
            usleep(10_000)  // the creating worker may not have finished writing it
        }
        throw StartupError("the hash key file (\(Self.hashKeyFileName)) is empty or too short")
    }

    /// The key a hash key file's text gives: the text without the spaces, tabs and carriage
    /// returns at its ends and without its line feeds and lone carriage returns; nil when that
    /// is shorter than 32 bytes. The workers and `weatherctl check` both read it so. It must
    /// not change: every stored installation id hash is made with the bytes it returns (a CRLF
    /// inside the text, one `Character` to Swift, stays in the key).
    public static func hashKey(fromFileText text: String) -> [UInt8]? {
        let key = text.trimmingSpaces().replacingNewlines()
        return key.utf8.count >= 32 ? Array(key.utf8) : nil
    }

    /// What the database records of a hash key (`weather_hash_key`, migration 0007): lowercase
    /// hex HMAC-SHA256 of a fixed label under the key. It tells nothing of the key, and no
    /// installation id or token is ever this label.
    public static func fingerprint(ofHashKey key: [UInt8]) -> String {
        HMACSHA256.hex("closet-weather hash key fingerprint v1", key: key)
    }

    /// A hash key that is not the database's (a restore beside another `hash.key`, a
    /// `WEATHER_HASH_KEY` that differs between hosts): every installation id hash stored would
    /// match nothing, so `--installation-id` found no session, and workers on different keys
    /// take each other's idempotent refresh retries for replays and revoke the session.
    public static let hashKeyMismatch =
        "the hash key (\(hashKeyFileName), or WEATHER_HASH_KEY) is not the one this database records for its sessions: put back the hash.key that belongs to this database (restored with it from the same backup); if this one is that key (the record was made by a worker started with a wrong one), or to go on with it on purpose, run `weatherctl adopt-hash-key` and restart every worker (INSTALL.md, \"A lost hash key\")"

    /// What `verifyHashKey` found, for the worker's log.
    public enum HashKeyCheck: Equatable {
        /// The key is the one recorded, or the store could not say.
        case matches
        /// None was recorded, and now this key is; `sessionsStored`: the database already held
        /// sessions made before it kept a record (an upgrade, or a backup from before it),
        /// whose key nothing can check.
        case recorded(sessionsStored: Bool)
        /// Another key was recorded, with no session stored; this one is now.
        case replaced
    }

    /// Checks `key` against the database's record of its hash key (`GatewayStore.recordedHashKey`:
    /// one read at the usual start) and records it when there is none: a new database, or the
    /// first start of the release that brought the record (which then takes the key it finds).
    /// Throws `hashKeyMismatch` when another key is recorded and the database holds sessions, or
    /// when another worker recorded its own key between this one's read and its write (two
    /// workers starting together on a new database with different keys: one stops). A recorded
    /// key with no session stored is replaced, in the same transaction that finds none (nothing
    /// was hashed with it), as a missing key is made again; so a worker on another key started
    /// later, before the first session, takes the record, and the first stops at its next start.
    /// A store that cannot be read (a copy from before the record, a damaged file) is no reason
    /// to stop: it shows its trouble elsewhere, and the next start checks again. One that was
    /// read but cannot be written (busy, read-only, full) is judged by what was read: another
    /// key with sessions stored, or none known, stops the worker.
    @discardableResult
    public static func verifyHashKey(_ key: [UInt8], store: any GatewayStore, now: Timestamp) throws -> HashKeyCheck {
        let fingerprint = fingerprint(ofHashKey: key)
        let recorded: String?
        do { recorded = try store.recordedHashKey()?.fingerprint } catch { return .matches }
        guard recorded != fingerprint else { return .matches }
        let when: HashKeyRecording = recorded == nil ? .ifNoneRecorded : .whileNoSessionIsStored
        guard let standing = try? store.recordHashKey(fingerprint: fingerprint, when: when, now: now) else {
            // A review: a mismatch read and then dropped because the write failed served on.
            if recorded != nil, (try? store.holdsAnySession()) != false { throw StartupError(hashKeyMismatch) }
            return .matches
        }
        guard standing == fingerprint else { throw StartupError(hashKeyMismatch) }
        return recorded == nil ? .recorded(sessionsStored: (try? store.holdsAnySession()) ?? true) : .replaced
    }

    /// The worker's log line for what `verifyHashKey` found, or nil when there is nothing to say.
    public static func hashKeyNotice(_ check: HashKeyCheck) -> String? {
        switch check {
        case .matches: nil
        case .recorded(sessionsStored: false): "recorded the hash key's fingerprint in the database (a new database, or its first start with this release)"
        case .recorded(sessionsStored: true):
            "recorded the hash key's fingerprint in the database, which already held sessions made before it kept a record (an upgrade, or a backup restored from before it): nothing could check that this key is theirs; if it is not, put back theirs and run `weatherctl adopt-hash-key` (INSTALL.md, \"A lost hash key\")"
        case .replaced: "recorded the hash key's fingerprint in place of another key's: the database holds no session yet, so nothing was hashed with that one"
        }
    }

    /// Why a worker must not create the database at `WEATHER_DB_PATH`, or nil when it may: it is
    /// missing while what belonged to it is still there. Beside its `-wal` or `-shm`, it was
    /// deleted under running workers, which may still hold it (and SQLite, opening a new file
    /// there, would discard the `-wal` that holds its newest writes); beside its `-writer` page
    /// (which outlives every connection), it was deleted or moved, and a new empty one would
    /// drop every session with no word (a disaster-recovery drill found both). Not `hash.key`:
    /// one key serves every database of its folder. `onPurpose` (`weatherctl migrate`): only the
    /// first reason holds, since creating the database is what the operator asked for.
    public static func missingDatabase(_ config: GatewayConfig, onPurpose: Bool = false) -> String? {
        let path = config.databasePath
        guard access(path, F_OK) != 0, errno == ENOENT else { return nil }
        if access(path + "-wal", F_OK) == 0 || access(path + "-shm", F_OK) == 0 {
            return
                "the database (WEATHER_DB_PATH) is missing but its -wal or -shm is still there: it was deleted while workers ran, and one still running may hold it; do not restart the workers, recover it first (INSTALL.md, \"A deleted database\"), or delete its -wal and -shm to start afresh without the sessions"
        }
        if !onPurpose, access(path + "-writer", F_OK) == 0 {
            return
                "the database (WEATHER_DB_PATH) is missing but its -writer page is there: it was deleted or moved; put it back or restore a backup (INSTALL.md, \"A deleted database\"), or run `weatherctl migrate` to start afresh without the sessions"
        }
        return nil
    }

    /// Opens the database (creating it and applying migrations). A missing directory is a clear
    /// error, and so is a relative path: a worker's working folder is the web server's choice
    /// (mod_fcgid: the program's folder, in the document root), so the database would land
    /// wherever that is. (weatherctl, run from a shell, opens its own way and takes one.)
    public static func openStore(_ config: GatewayConfig) throws -> SQLiteGatewayStore {
        guard config.databasePath.hasPrefix("/") else {
            throw StartupError("WEATHER_DB_PATH must be an absolute path (starting with /): a worker's working folder is the web server's choice")
        }
        let dir = config.databaseFolder
        var st = stat()
        if !dir.isEmpty, stat(dir, &st) != 0 || (st.st_mode & S_IFMT) != S_IFDIR {
            throw StartupError(
                "the database directory (the folder of WEATHER_DB_PATH) does not exist; create it and make it writable for the service user (`weatherctl check` shows the paths)"
            )
        }
        if let why = missingDatabase(config) { throw StartupError(why) }
        do {
            return try SQLiteGatewayStore(path: config.databasePath)
        } catch {
            throw StartupError(
                "cannot open the database (WEATHER_DB_PATH): \((error as? DatabaseError)?.summary ?? "\(type(of: error))") (`weatherctl check` shows the path)")
        }
    }

    /// Whole file as text; `nil` when it cannot be read.
    public static func readFile(_ path: String, limit: Int = 1 << 20) -> String? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while out.count < limit {
            let n = buf.withUnsafeMutableBytes { read(fd, $0.baseAddress, 4096) }
            if n < 0 { return nil }
            if n == 0 { break }
            out += buf.prefix(n)
        }
        return String(decoding: out, as: UTF8.self)
    }
}
