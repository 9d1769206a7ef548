/// Where log lines go. Passed in, never created inside the library.
public protocol LogSink: AnyObject {
    /// Writes one finished line (no newline at its end).
    func write(_ line: String)
    /// Writes one finished line given as its UTF-8 bytes (no newline at its end). By default
    /// as a `String` through `write(_:)`; a sink that writes bytes anyway takes them as they are.
    func write(utf8 line: UnsafeBufferPointer<UInt8>)
}

extension LogSink {
    public func write(utf8 line: UnsafeBufferPointer<UInt8>) { write(String(decoding: line, as: UTF8.self)) }
}

/// Collects lines in memory (tests).
public final class MemoryLog: LogSink {
    public private(set) var lines: [String] = []
    public init() {}
    public func write(_ line: String) { lines.append(line) }
}

/// `key=value` formatting for one log line; values with spaces or quotes are quoted. Built in one
/// byte buffer: a line is written for every request.
public struct LogLine {
    private var bytes: [UInt8] = []
    public init() { bytes.reserveCapacity(256) }

    /// A value the caller built from known-plain parts (timestamps, numbers, route names, ids
    /// already checked): no scan, no quoting.
    mutating func addPlain(_ key: String, _ value: String?) {
        guard let value else { return }
        if !bytes.isEmpty { bytes.append(UInt8(ascii: " ")) }
        bytes.appendUTF8(key)
        bytes.append(UInt8(ascii: "="))
        bytes.appendUTF8(value)
    }

    /// `key=12.345`: `microseconds` as milliseconds with three decimals, the fraction written as
    /// digits (a string joined from an interpolation and a padding cost two joins on every line).
    mutating func addMilliseconds(_ key: String, microseconds: UInt64) {
        addPlain(key, String(microseconds / 1000))
        bytes.append(UInt8(ascii: "."))
        let fraction = microseconds % 1000
        bytes.append(UInt8(ascii: "0") + UInt8(fraction / 100))
        bytes.append(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        bytes.append(UInt8(ascii: "0") + UInt8(fraction % 10))
    }

    /// `key=value` for a value from outside (a SQLite message, a file name): as it is when plain
    /// (printable ASCII without `"`, `=` or `\`), else quoted with `"` and `\` escaped and control
    /// characters as `?`; at most 120 characters, so no value can forge a field or a line.
    /// Nothing when `value` is nil.
    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        if !bytes.isEmpty { bytes.append(UInt8(ascii: " ")) }
        bytes.appendUTF8(key)
        bytes.append(UInt8(ascii: "="))
        // Fast path: plain values (ids, routes, numbers) go in as they are.
        let plain = value.utf8
        if !plain.isEmpty, plain.count <= 120,
            plain.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\") })
        {
            bytes.appendUTF8(value)
            return
        }
        bytes.append(UInt8(ascii: "\""))
        for s in value.prefix(120).unicodeScalars {
            if s == "\"" || s == "\\" {
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(UInt8(s.value))
            } else if s.value < 32 || s.value == 127 {
                bytes.append(UInt8(ascii: "?"))
            } else {
                bytes.appendUTF8(String(s))
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// The line as text.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Hands the line to `log` as bytes: the request's line is written without being made a
    /// `String` first (an allocation and a UTF-8 check of every byte, on every request).
    public func write(to log: any LogSink) {
        bytes.withUnsafeBufferPointer { log.write(utf8: $0) }
    }
}
