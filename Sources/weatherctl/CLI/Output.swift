import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Aligned columns for people: a header row, then one row per item. Numbers align right.
struct Table {
    enum Alignment { case left, right }

    var columns: [(title: String, alignment: Alignment)]
    var rows: [[String]] = []

    init(_ columns: [(String, Alignment)]) {
        self.columns = columns.map { (title: $0.0, alignment: $0.1) }
    }

    mutating func append(_ row: [String]) {
        precondition(row.count == columns.count, "row has \(row.count) cells for \(columns.count) columns")
        rows.append(row)
    }

    var rendered: String {
        var widths = columns.map(\.title.count)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            var text = ""
            for (i, cell) in cells.enumerated() {
                let fill = String(repeating: " ", count: widths[i] - cell.count)
                let isLast = i == cells.count - 1
                switch columns[i].alignment {
                case .left: text += cell + (isLast ? "" : fill)
                case .right: text += fill + cell
                }
                if !isLast { text += "  " }
            }
            return text + "\n"
        }
        return line(columns.map(\.title)) + rows.map(line).joined()
    }
}

/// Label-value lines (`sessions show`), labels padded to one width.
func keyValueLines(_ pairs: [(String, String)]) -> String {
    let width = pairs.map(\.0.count).max() ?? 0
    return pairs.map { $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 + "\n" }.joined()
}

/// Standard output and error as whole `write`s, so a line is never split by another process.
enum Terminal {
    /// A word from the command line, quoted for a message (at most `limit` characters), unless
    /// it may be a secret, since messages reach logs, the journal and scrollback: something
    /// shaped like an installation id (a UUID; the tool takes one only on standard input), a
    /// session token (`wta_`, `wtr_`), or any other word of 16 characters or more that is
    /// neither an option nor a session id (a provider key or the legacy token pasted in the
    /// wrong place). Those are described, not repeated.
    static func quoted(_ text: some StringProtocol, limit: Int = 40) -> String {
        var word = String(text)
        if word.withUTF8(TokenSyntax.containsUUID) {
            return "(an installation id; give it with --installation-id - on standard input)"
        }
        if text.contains("wta_") || text.contains("wtr_") { return "(a token, not shown)" }
        if text.count >= 16 && !text.hasPrefix("-") && !text.hasPrefix("aws_") { return "(\(text.count) characters, not shown)" }
        return "\"\(text.prefix(limit))\""
    }

    static func out(_ text: String) { write(text, to: 1) }

    /// One line on standard error, prefixed with the program name.
    static func error(_ message: String) { write("weatherctl: " + message + "\n", to: 2) }

    static func write(_ text: String, to fd: Int32) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
