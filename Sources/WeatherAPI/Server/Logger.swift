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
        // Fast path: plain values (ids, routes, numbers) go in as they are.
        let bytes = value.utf8
        if !bytes.isEmpty, bytes.count <= 120,
           bytes.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\") }) {
            parts.append(key + "=" + value)
            return
        }
        let escaped = value.prefix(120).unicodeScalars.map { s -> String in
            if s == "\"" || s == "\\" { return "\\" + String(s) }
            if s.value < 32 || s.value == 127 { return "?" }
            return String(s)
        }.joined()
        parts.append("\(key)=\"\(escaped)\"")
    }

    public var text: String { parts.joined(separator: " ") }
}
