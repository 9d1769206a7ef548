import WeatherAPI
import WeatherCore
import WeatherStore
#if canImport(Glibc)
import Glibc
#endif

/// What every command may need, opened on demand from the same places the workers use
/// (`Bootstrap.loadConfig`: environment first, then the `WEATHER_CONFIG` file).
struct CommandContext {
    let environment: [String: String]
    let now: Timestamp
    let json: Bool
    /// The databases this command opened, to check afterwards that none changed under a reading
    /// command that opened it `immutable` (`Database.changedWhileReadImmutable`).
    let opened = OpenedDatabases()

    final class OpenedDatabases {
        var databases: [Database] = []
        var changedWhileRead: Bool { databases.contains { $0.changedWhileReadImmutable } }
    }

    /// The configuration as the workers read it, or a failure naming the setting to fix. A
    /// settings file this user cannot read stops the command, which would otherwise act on other
    /// settings (a review found `migrate` or `revoke` run as the wrong user silently used the
    /// defaults). `forReading` (stats, sessions, check): such a file is passed over, as a
    /// monitoring user reading a backup copy may not read the service's settings.
    func config(forReading: Bool = false) throws(CLIError) -> GatewayConfig { try configAndFile(forReading: forReading).config }

    /// The configuration, the file it was read from (nil: the environment alone), and, when
    /// `forReading`, the default files there that this user cannot read (`check` fails on them).
    func configAndFile(forReading: Bool) throws(CLIError) -> (config: GatewayConfig, file: String?, unreadable: [String]) {
        do {
            let loaded = try Bootstrap.loadConfigAndSource(environment: environment, strict: !forReading)
            return (loaded.config, loaded.file, loaded.unreadable)
        } catch {
            throw .failure("cannot load the configuration: \(error)")
        }
    }

    /// How `openStore` treats the database file.
    enum Opening {
        /// The file must exist and every migration be applied (everyday commands).
        case migrated
        /// For commands that only read (`stats`, `sessions`): opened read-only, so they work for a
        /// monitoring user and on a copy nobody may write; pending migrations (an older release's
        /// copy) are said on standard error, not refused.
        case migratedReadOnly
        /// The file may be created (`migrate`).
        case creating
        /// The file must exist; nothing is written, not even the journal mode (`check`).
        case readOnly
    }

    /// The operator's view of the store at `WEATHER_DB_PATH`.
    /// Why this user cannot write where the database lives, as "; …", or "" when it can:
    /// SQLite's "unable to open database file" (error 14) said neither (an operator audit).
    static func whyNotWritable(_ config: GatewayConfig) -> String {
        let folder = config.databaseFolder.isEmpty ? "." : config.databaseFolder
        for path in [folder, config.databasePath] where access(path, F_OK) == 0 {
            guard access(path, path == folder ? W_OK | X_OK : W_OK) != 0 else { continue }
            if errno == EROFS { return "; the file system is read-only" }
            if errno == EACCES {
                return "; this user (uid \(geteuid())) may not write the database \(path == folder ? "folder" : "file"): run weatherctl as the service user"
            }
        }
        return ""
    }

    func openStore(_ config: GatewayConfig, _ opening: Opening = .migrated) throws(CLIError) -> any OperatorStore {
        let path = config.databasePath
        if opening == .creating {
            let dir = config.databaseFolder
            if !dir.isEmpty, !Self.isDirectory(dir) {
                throw .failure(
                    "the database folder WEATHER_DB_PATH names does not exist; create it and make it writable for the service user (`weatherctl check` prints the paths)"
                )
            }
            if let why = Bootstrap.missingDatabase(config, onPurpose: true) { throw .failure(why) }
        } else if !Self.exists(path) {
            // A folder this user may not enter (the service's data folder is 0700) is not a
            // missing database: saying so sent operators to `migrate` (a black-box operator audit).
            if errno == EACCES {
                throw .failure(
                    "this user (uid \(geteuid())) may not reach the database WEATHER_DB_PATH names: permission denied on its folder; run weatherctl as the service user"
                )
            }
            if let why = Bootstrap.missingDatabase(config) { throw .failure(why) }
            throw .failure("the database WEATHER_DB_PATH names does not exist; run `weatherctl migrate` to create it (`weatherctl check` prints the paths)")
        }
        let store: SQLiteGatewayStore
        do {
            let readOnly = opening == .readOnly || opening == .migratedReadOnly
            // Created only by `migrate` (`.creating`); checked to exist above for the others, and not
            // made should it vanish in between.
            store = SQLiteGatewayStore(
                database: try Database(path: path, readOnly: readOnly, gatewayFile: !readOnly, create: opening == .creating))
            opened.databases.append(store.db)
        } catch {
            let readOnly = opening == .readOnly || opening == .migratedReadOnly
            throw .failure("cannot open the database WEATHER_DB_PATH names: \(error.summary)" + (readOnly ? "" : Self.whyNotWritable(config)))
        }
        if opening == .migrated || opening == .migratedReadOnly {
            let pending = try storeCall { () throws(StoreError) in try store.pendingMigrations() }
            if !pending.isEmpty {
                let what = "the database has \(pending.count) pending migration(s) (\(pending.joined(separator: ", ")))"
                // Reading commands read an older release's database as it is (INSTALL.md: they
                // read backup copies, which migrating would have to write; an operations audit):
                // said, and a table it lacks fails the command with SQLite's own words.
                guard opening == .migratedReadOnly else { throw .failure("\(what); run `weatherctl migrate`") }
                Terminal.write("weatherctl: \(what): an older release's; read as it is (`weatherctl migrate` brings the live one up to date)\n", to: 2)
            }
        }
        return store
    }

    /// The `--installation-id` given: the UUID itself, or with `-` the first line of standard input,
    /// so that the id stays out of the shell's history and the process list.
    func installationId(_ args: ParsedArguments) throws(CLIError) -> String? {
        guard let given = args.value("--installation-id") else { return nil }
        guard given == "-" else { return given }
        if isatty(0) == 1 { Terminal.write("installation id: ", to: 2) }
        guard let line = readLine(strippingNewline: true), !line.trimmingSpaces().isEmpty else {
            throw .usage("--installation-id - reads the UUID from standard input, which had none")
        }
        return line.trimmingSpaces()
    }

    /// `installation_id_hash` of a UUID, with the workers' key. A missing key file is not created
    /// here: without it no session can belong to any installation, and a new key would hide that.
    /// Nor is a key other than the one the database records (`Bootstrap.hashKeyMismatch`) used
    /// where it holds sessions: it would find none of them, and "no session" would pass for the
    /// truth (as `check` judges it).
    func installationHash(_ uuid: String, _ config: GatewayConfig, store: any OperatorStore) throws(CLIError) -> String {
        guard TokenSyntax.isUUID(uuid) else { throw .usage("--installation-id must be a UUID (8-4-4-4-12 hex digits)") }
        let key = try hashKey(config)
        if let recorded = try storeCall({ () throws(StoreError) in try store.recordedHashKey() }),
            recorded.fingerprint != Bootstrap.fingerprint(ofHashKey: key), (try? store.holdsAnySession()) != false
        {
            throw .failure(Bootstrap.hashKeyMismatch)
        }
        return TokenMinter(hashKey: key).installationHash(uuid)
    }

    /// The workers' hash key as they read it; never created here.
    func hashKey(_ config: GatewayConfig) throws(CLIError) -> [UInt8] {
        if config.hashKey == nil, !Self.exists(config.hashKeyFile) {
            throw .failure(
                "no hash key: WEATHER_HASH_KEY is unset and there is no hash.key beside the database, so no session can be matched to an installation")
        }
        do {
            return try Bootstrap.hashKey(for: config, sessionsStored: { true })
        } catch {
            throw .failure("cannot read the hash key: \(error)")
        }
    }

    /// Runs a store call, turning its error into a one-line failure.
    func storeCall<T>(_ body: () throws(StoreError) -> T) throws(CLIError) -> T {
        do { return try body() } catch { throw .failure("database: \(error.message)") }
    }

    /// Human text, or the JSON document when `--json` was given.
    func emit(human: @autoclosure () -> String, json document: @autoclosure () -> JSONDocument) {
        Terminal.out(json ? document().rendered : human())
    }

    static func exists(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0
    }

    static func isDirectory(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR
    }
}
