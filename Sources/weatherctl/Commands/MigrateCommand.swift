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
            Run as root, it gives the database and its -wal, -shm and -writer files, where root owns
            them, to the owner of that directory, the service's user: files owned by root would
            leave the workers answering 503 to every write. It refuses a database on which a newer
            release applied migrations this one does not know.
            Each migration runs in its own transaction together with its record in d1_migrations,
            so running this while workers serve, or twice at once, applies each file exactly once.
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: Context) throws(CLIError) -> Int32 {
        let config = try context.config()
        // Run as root: whatever root owns there when this run ends (what it created, even if a
        // migration failed, or what an earlier root run left) goes to the folder's owner.
        defer { if geteuid() == 0 { giveToFolderOwner(config) } }
        let store = try context.openStore(config, .creating)
        let unknown = try context.storeCall { () throws(StoreError) in try store.unknownMigrations() }
        guard unknown.isEmpty else {
            throw .failure("the database has \(unknown.count) migration(s) this weatherctl does not know (\(unknown.joined(separator: ", "))): a newer release applied them; use that release's weatherctl")
        }
        let applied = try context.storeCall { () throws(StoreError) in try store.applyMigrations() }
        context.emit(
            human: applied.isEmpty ? "no pending migrations\n" : applied.map { "applied \($0)\n" }.joined(),
            json: .object([("applied", .array(applied.map(JSONValue.string)))]))
        return ExitCode.ok
    }

    /// The database and the files beside it that root owns, given to the owner of their folder
    /// (when that is not root). Each is opened without following a symbolic link, and only a
    /// regular file with one name is changed: the folder is the service user's, and a link
    /// planted there must not lead root to give away another file.
    static func giveToFolderOwner(_ config: GatewayConfig) {
        var folder = stat()
        guard stat(config.databaseFolder.isEmpty ? "." : config.databaseFolder, &folder) == 0, folder.st_uid != 0 else { return }
        for suffix in ["", "-wal", "-shm", "-writer"] {
            let fd = open(config.databasePath + suffix, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard fd >= 0 else { continue }  // missing, or a link: nothing to do
            defer { close(fd) }
            var file = stat()
            guard fstat(fd, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1, file.st_uid == 0 else { continue }
            _ = fchown(fd, folder.st_uid, folder.st_gid)
        }
    }
}
