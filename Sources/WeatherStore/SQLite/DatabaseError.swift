import CSQLite
import WeatherCore

/// A failed SQLite call: the result code, SQLite's message and the statement text (never bound values).
public struct DatabaseError: Error, CustomStringConvertible {
    public let resultCode: Int32
    public let message: String
    public let sql: String?

    public var description: String { summary + (sql.map { " in `\($0.prefix(80))`" } ?? "") }
    /// Without the statement, for log lines (API.md: no SQL in any log line).
    public var summary: String { "SQLite error \(resultCode): \(message)" }

    /// Busy, locked, read-only, full or I/O: the database is there but not usable right now (503).
    public var isUnavailable: Bool {
        let primary = resultCode & 0xff
        return [
            SQLITE_BUSY, SQLITE_LOCKED, SQLITE_READONLY, SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN,
            SQLITE_CORRUPT, SQLITE_NOTADB, SQLITE_PROTOCOL,
        ].contains(primary)
    }

    /// `summary`, not `description`: weatherctl prints the message, and under the prune timer it
    /// reaches the journal (API.md: no SQL in any log line).
    var storeError: StoreError { StoreError(code: resultCode, message: summary) }
}
