import CSQLite
import WeatherCore

/// One migration file: its file name (as `d1_migrations.name` records it) and its SQL.
public struct Migration: Sendable {
    public let name: String
    public let sql: String
}

/// Applies migrations the way `wrangler d1 migrations apply` does, so one folder serves both
/// deployments: names recorded in `d1_migrations`, files applied in numeric order, each once.
public enum Migrator {
    static let createTable = """
        CREATE TABLE IF NOT EXISTS d1_migrations(
            id         INTEGER PRIMARY KEY AUTOINCREMENT,
            name       TEXT UNIQUE,
            applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
        )
        """

    /// Applies every pending migration, each in its own `BEGIN IMMEDIATE` transaction together with
    /// its record, so workers starting at once apply each file exactly once. Returns the names applied.
    /// The names already recorded are read first, and only the others take the write lock: an
    /// up-to-date database costs one read, where it cost a write transaction a file, at every
    /// worker's start and on every request under plain CGI (a hot-path audit, session 32).
    ///
    /// What a migration deletes is overwritten in the file (`secure_delete`, whatever the build's
    /// default) and, once any was applied, the WAL is emptied of the pages' earlier images, as
    /// the clean-up does: 0009 deletes rate buckets keyed by client addresses (a privacy audit,
    /// session 35, found them left in free space and in the WAL otherwise).
    @discardableResult
    public static func apply(_ migrations: [Migration] = embeddedMigrations, to db: Database) throws -> [String] {
        try refuseAnotherProgramsFile(db)
        let recorded = Set(try recordedNames(in: db))
        let pending = migrations.sorted(by: { $0.name < $1.name }).filter { !recorded.contains($0.name) }
        guard !pending.isEmpty else { return [] }
        let secureDelete = try db.scalarInt("PRAGMA secure_delete") ?? 0
        try db.execute("PRAGMA secure_delete = ON")
        defer { try? db.execute("PRAGMA secure_delete = \(secureDelete)") }
        var applied: [String] = []
        defer { if !applied.isEmpty { db.truncateWAL() } }
        for m in pending {
            let done: Bool = try db.transaction {
                if try db.scalarInt("SELECT 1 FROM d1_migrations WHERE name = ?1", [.text(m.name)]) != nil { return false }
                try db.execute(m.sql)
                try db.run("INSERT INTO d1_migrations(name) VALUES (?1)", [.text(m.name)])
                return true
            }
            if done { applied.append(m.name) }
        }
        return applied
    }

    /// Throws when the file holds tables (besides a migrations' record) but not the sessions
    /// table: another program's database, a `WEATHER_DB_PATH` pointing at the wrong file, or
    /// another D1 project's export, whose `d1_migrations` names its own files or none. Such a
    /// file was given this gateway's tables (and switched to WAL, with a `-writer` beside it)
    /// without a word (an operations audit; a security re-audit for the D1 export). A file of
    /// ours never looks so: migration 0001 makes the sessions table and the tokens table in one
    /// transaction, and before it the file holds the record alone. One look at `sqlite_master`.
    public static func refuseAnotherProgramsFile(_ db: Database) throws(DatabaseError) {
        // One statement, one snapshot: another connection creating the tables of a new file
        // between two lookups made a good file look foreign (a review; 2 in 800 racing opens).
        // The tables and views other than the migrations' record, when the sessions table is
        // not there (0 when it is; nil for a file with none at all). Litestream's own tables
        // (`_litestream_seq`, `_litestream_lock`), made when it replicates a new file, are not
        // another program's.
        guard
            let foreign = try db.scalarInt(
                """
                SELECT CASE WHEN sum(name = 'anonymous_weather_sessions') > 0 THEN 0 ELSE sum(name <> 'd1_migrations') END
                FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'
                  AND name NOT LIKE '\\_litestream\\_%' ESCAPE '\\'
                """), foreign > 0
        else { return }
        throw DatabaseError(
            resultCode: SQLITE_ERROR,
            message:
                "the file holds \(foreign) table(s) or view(s) and not this gateway's sessions table: another program's; is WEATHER_DB_PATH the right file?",
            sql: nil)
    }

    /// Names of migrations not yet recorded in the database, read without writing: a database
    /// with no record at all throws (health's 503) rather than being given one. Health asks it on
    /// every call, which used to parse and run the record's `CREATE TABLE IF NOT EXISTS` each time.
    public static func pending(_ migrations: [Migration] = embeddedMigrations, in db: Database) throws -> [String] {
        let done = Set(try recorded(in: db))
        return migrations.map(\.name).filter { !done.contains($0) }
    }

    /// The names `d1_migrations` records, the table made first if missing (`apply`).
    private static func recordedNames(in db: Database) throws -> [String] {
        try db.execute(createTable)
        return try recorded(in: db)
    }

    private static func recorded(in db: Database) throws -> [String] {
        try db.statement("SELECT name FROM d1_migrations").rows { $0.text(0) ?? "" }
    }
}
