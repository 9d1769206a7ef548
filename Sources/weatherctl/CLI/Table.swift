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
