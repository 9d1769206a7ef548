import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// `weatherctl migrate`: applies the migrations this build carries, as the workers do at start-up.
enum MigrateCommand {
    static let spec = CommandSpec(
        name: "migrate",
        summary: "apply pending database migrations and list the ones applied",
        details: """
            Creates the database at WEATHER_DB_PATH when it does not exist (its directory must).
            Run as root, it gives a database it creates (and its -wal, -shm and -writer files) to
            the owner of that directory, the service's user: files owned by root would leave the
            workers answering 503 to every write.
            Each migration runs in its own transaction together with its record in d1_migrations,
            so running this while workers serve, or twice at once, applies each file exactly once.
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: Context) throws(CLIError) -> Int32 {
        let config = try context.config()
        let created = !Context.exists(config.databasePath)
        let store = try context.openStore(config, .creating)
        let unknown = try context.storeCall { () throws(StoreError) in try store.unknownMigrations() }
        guard unknown.isEmpty else {
            throw .failure("the database has \(unknown.count) migration(s) this weatherctl does not know (\(unknown.joined(separator: ", "))): a newer release applied them; use that release's weatherctl")
        }
        let applied = try context.storeCall { () throws(StoreError) in try store.applyMigrations() }
        if created && geteuid() == 0 { giveToFolderOwner(config) }
        context.emit(
            human: applied.isEmpty ? "no pending migrations\n" : applied.map { "applied \($0)\n" }.joined(),
            json: .object([("applied", .array(applied.map(JSONValue.string)))]))
        return ExitCode.ok
    }

    /// The new database and the files beside it, owned by the owner of their folder.
    static func giveToFolderOwner(_ config: GatewayConfig) {
        var folder = stat()
        guard stat(config.databaseFolder.isEmpty ? "." : config.databaseFolder, &folder) == 0, folder.st_uid != 0 else { return }
        for suffix in ["", "-wal", "-shm", "-writer"] {
            _ = chown(config.databasePath + suffix, folder.st_uid, folder.st_gid)  // a missing one: nothing to do
        }
    }
}
