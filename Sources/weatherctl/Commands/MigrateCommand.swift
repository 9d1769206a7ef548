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
            leave the workers answering 503 to every write (a file it could not give away is named
            on standard error by its suffix, and the exit status is 1). It refuses a database on
            which a newer release applied migrations this one does not know.
            Each migration runs in its own transaction together with its record in d1_migrations,
            so running this while workers serve, or twice at once, applies each file exactly once.
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let config = try context.config()
        // Run as root: whatever root owns there when this run ends (what it created, even if a
        // migration failed, or what an earlier root run left) goes to the folder's owner.
        func handOver() -> Bool {
            guard geteuid() == 0 else { return true }
            let failures = giveToFolderOwner(config)
            for failure in failures { Terminal.error(failure) }
            return failures.isEmpty
        }
        do throws(CLIError) {
            try applyMigrations(config, context)
        } catch {
            _ = handOver()
            throw error
        }
        return handOver() ? ExitCode.ok : ExitCode.failure
    }

    private static func applyMigrations(_ config: GatewayConfig, _ context: CommandContext) throws(CLIError) {
        let existed = access(config.databasePath, F_OK) == 0
        let store = try context.openStore(config, .creating)
        // A database made anew beside the -writer page of one found damaged (deleted, then
        // started afresh) often gets its inode number: the damage mark is not its own.
        if !existed { _ = store.clearDamageMark() }
        let unknown = try context.storeCall { () throws(StoreError) in try store.unknownMigrations() }
        guard unknown.isEmpty else {
            throw .failure(
                "the database has \(unknown.count) migration(s) this weatherctl does not know (\(unknown.joined(separator: ", "))): a newer release applied them; use that release's weatherctl"
            )
        }
        let applied = try context.storeCall { () throws(StoreError) in try store.applyMigrations() }
        context.emit(
            human: applied.isEmpty ? "no pending migrations\n" : applied.map { "applied \($0)\n" }.joined(),
            json: .object([("applied", .array(applied.map(JSONDocument.string)))]))
    }

    /// The database and the files beside it that root owns, given to the owner of their folder
    /// (when that is not root). Each is opened without following a symbolic link, and only a
    /// regular file with one name is changed: the folder is the service user's, and a link
    /// planted there must not lead root to give away another file. Returns a line for each file
    /// it could not give away (the workers could not write it).
    static func giveToFolderOwner(_ config: GatewayConfig) -> [String] {
        var folder = stat()
        guard stat(config.databaseFolder.isEmpty ? "." : config.databaseFolder, &folder) == 0, folder.st_uid != 0 else { return [] }
        var failures: [String] = []
        for suffix in ["", "-wal", "-shm", "-writer"] {
            let fd = open(config.databasePath + suffix, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
            guard fd >= 0 else { continue }  // missing, or a link: nothing to do
            defer { close(fd) }
            var file = stat()
            guard fstat(fd, &file) == 0, file.st_mode & S_IFMT == S_IFREG, file.st_nlink == 1, file.st_uid == 0 else { continue }
            if fchown(fd, folder.st_uid, folder.st_gid) != 0 {
                let why = String(cString: strerror(errno))
                failures.append(
                    "could not give the database\(suffix.isEmpty ? " file" : "'s \(suffix) file") to the folder's owner (uid \(folder.st_uid)): \(why); the workers cannot write it until it is theirs (chown it by hand; `weatherctl check` prints the path)"
                )
            }
        }
        return failures
    }
}
