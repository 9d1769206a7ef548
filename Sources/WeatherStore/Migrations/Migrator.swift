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
    @discardableResult
    public static func apply(_ migrations: [Migration] = embeddedMigrations, to db: Database) throws -> [String] {
        // Another program's database (a WEATHER_DB_PATH pointing at the wrong file) was given our
        // tables without a word (an operations audit): tables, yet neither the migrations'
        // record nor the sessions table (which a D1 export brings) is refused.
        if try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'd1_migrations'") == nil,
           try db.scalarInt("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'anonymous_weather_sessions'") == nil,
           let other = try db.scalarInt("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"), other > 0 {
            throw DatabaseError(resultCode: SQLITE_ERROR, message: "the file holds \(other) table(s) of another program and none of this gateway's; is WEATHER_DB_PATH the right file?", sql: nil)
        }
        try db.execute(createTable)
        var applied: [String] = []
        for m in migrations.sorted(by: { $0.name < $1.name }) {
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

    /// Names of migrations not yet recorded in the database.
    public static func pending(_ migrations: [Migration] = embeddedMigrations, in db: Database) throws -> [String] {
        try db.execute(createTable)
        let s = try db.statement("SELECT name FROM d1_migrations")
        let done = Set(try s.rows { $0.text(0) ?? "" })
        return migrations.map(\.name).filter { !done.contains($0) }
    }
}
