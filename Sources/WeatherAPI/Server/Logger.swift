/// Where log lines go. Passed in, never created inside the library.
public protocol LogSink: AnyObject {
    func write(_ line: String)
}

/// Collects lines in memory (tests).
public final class MemoryLog: LogSink {
    public private(set) var lines: [String] = []
    public init() {}
    public func write(_ line: String) { lines.append(line) }
}

/// `key=value` formatting for one log line; values with spaces or quotes are quoted.
public struct LogLine {
    private var parts: [String] = []
    public init() {}

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        let safe = value.count <= 120 ? value : String(value.prefix(120))
        if safe.isEmpty || safe.contains(where: { $0 == " " || $0 == "\"" || $0 == "=" || $0.asciiValue.map { $0 < 32 } ?? false }) {
            let escaped = safe.unicodeScalars.map { s -> String in
                if s == "\"" || s == "\\" { return "\\" + String(s) }
                if s.value < 32 { return "?" }
                return String(s)
            }.joined()
            parts.append("\(key)=\"\(escaped)\"")
        } else {
            parts.append("\(key)=\(safe)")
        }
    }

    public var text: String { parts.joined(separator: " ") }
}
