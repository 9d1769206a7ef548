import WeatherCore

/// How a time that may be missing is printed: in a table and in `--json`.
extension Timestamp? {
    /// Wire format, or `-` for a table cell.
    var cell: String { self?.iso8601 ?? "-" }
    /// Wire format, or `null`.
    var json: JSONDocument { self.map { .string($0.iso8601) } ?? .null }
}
