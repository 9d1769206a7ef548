import CSQLite

/// A prepared statement; finalized when released.
public final class Statement {
    let pointer: OpaquePointer
    unowned let database: Database
    let sql: String

    init(database: Database, sql: String) throws(DatabaseError) {
        var stmt: OpaquePointer?
        let rc = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &stmt, nil)
        guard rc == SQLITE_OK, let stmt else { throw database.error(rc, sql: sql) }
        self.pointer = stmt
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(pointer) }

    func reset() {
        sqlite3_reset(pointer)
        sqlite3_clear_bindings(pointer)
    }

    /// Binds values to `?1...?n`.
    public func bind(_ values: [SQLValue]) throws(DatabaseError) {
        for (i, v) in values.enumerated() {
            let idx = Int32(i + 1)
            let rc: Int32
            switch v {
            case .text(let s): rc = sqlite3_bind_text(pointer, idx, s, -1, csqlite_transient())
            case .int(let n): rc = sqlite3_bind_int64(pointer, idx, n)
            case .blob(let b): rc = b.withUnsafeBytes { sqlite3_bind_blob(pointer, idx, $0.baseAddress, Int32(b.count), csqlite_transient()) }
            case .null: rc = sqlite3_bind_null(pointer, idx)
            }
            guard rc == SQLITE_OK else { throw database.error(rc, sql: sql) }
        }
    }

    /// Advances one row: true when a row is available.
    public func step() throws(DatabaseError) -> Bool {
        let rc = sqlite3_step(pointer)
        if rc == SQLITE_ROW { return true }
        if rc == SQLITE_DONE { return false }
        throw database.error(rc, sql: sql)
    }

    /// Whether column `col` (from 0) of the current row is NULL.
    public func isNull(_ col: Int32) -> Bool { sqlite3_column_type(pointer, col) == SQLITE_NULL }
    /// Column `col` of the current row as an integer (0 for NULL).
    public func int(_ col: Int32) -> Int64 { sqlite3_column_int64(pointer, col) }
    /// Column `col` of the current row as text; nil for NULL.
    public func text(_ col: Int32) -> String? {
        guard let c = sqlite3_column_text(pointer, col) else { return nil }
        return String(cString: c)
    }
    /// Column `col` of the current row as bytes; empty for NULL or an empty blob.
    public func blob(_ col: Int32) -> [UInt8] {
        let n = Int(sqlite3_column_bytes(pointer, col))
        guard n > 0, let p = sqlite3_column_blob(pointer, col) else { return [] }
        return Array(UnsafeRawBufferPointer(start: p, count: n))
    }

    /// Runs the statement with `bindings` and maps every row.
    public func rows<T>(_ bindings: [SQLValue] = [], _ map: (Statement) throws -> T) throws -> [T] {
        try bind(bindings)
        defer { reset() }
        var out: [T] = []
        while try step() { out.append(try map(self)) }
        return out
    }
}
