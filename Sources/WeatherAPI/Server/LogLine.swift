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
/// byte buffer of its own, written with `memcpy` after one capacity check (a line is written for
/// every request, and appending to an array cost a uniqueness and a capacity check for every
/// piece: about 1,000 instructions of a cached request's line; callgrind, session 29).
public struct LogLine: ~Copyable {
    private var buffer: UnsafeMutableBufferPointer<UInt8>
    private var count = 0

    public init() { buffer = .allocate(capacity: 512) }

    deinit { buffer.deallocate() }

    /// Room for `n` more bytes; the buffer doubles when a line outgrows it.
    private mutating func reserve(_ n: Int) {
        guard n > buffer.count - count else { return }
        let grown = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(buffer.count * 2, count + n))
        if let from = buffer.baseAddress, let to = grown.baseAddress { to.initialize(from: from, count: count) }
        buffer.deallocate()
        buffer = grown
    }

    private mutating func append(_ byte: UInt8) {
        reserve(1)
        buffer[count] = byte
        count += 1
    }

    private mutating func append(_ s: String) {
        let n = s.utf8.count
        reserve(n)
        let to = buffer.baseAddress! + count
        let copied: Void? = s.utf8.withContiguousStorageIfAvailable { from in
            if let base = from.baseAddress { to.initialize(from: base, count: from.count) }
        }
        if copied == nil { _ = UnsafeMutableBufferPointer(start: to, count: n).initialize(from: s.utf8) }
        count += n
    }

    /// A value the caller built from known-plain parts (timestamps, numbers, route names, ids
    /// already checked): no scan, no quoting.
    mutating func addPlain(_ key: String, _ value: String?) {
        guard let value else { return }
        if count > 0 { append(UInt8(ascii: " ")) }
        append(key)
        append(UInt8(ascii: "="))
        append(value)
    }

    /// `key=12.345`: `microseconds` as milliseconds with three decimals, the fraction written as
    /// digits (a string joined from an interpolation and a padding cost two joins on every line).
    mutating func addMilliseconds(_ key: String, microseconds: UInt64) {
        addPlain(key, String(microseconds / 1000))
        append(UInt8(ascii: "."))
        let fraction = microseconds % 1000
        append(UInt8(ascii: "0") + UInt8(fraction / 100))
        append(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        append(UInt8(ascii: "0") + UInt8(fraction % 10))
    }

    /// `key=value` for a value from outside (a SQLite message, a file name): as it is when plain
    /// (printable ASCII without `"`, `=` or `\`), else quoted with `"` and `\` escaped and control
    /// characters as `?`; at most 120 characters, so no value can forge a field or a line.
    /// Nothing when `value` is nil.
    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        if count > 0 { append(UInt8(ascii: " ")) }
        append(key)
        append(UInt8(ascii: "="))
        // Fast path: plain values (ids, routes, numbers) go in as they are.
        let plain = value.utf8
        if !plain.isEmpty, plain.count <= 120,
            plain.allSatisfy({ $0 > 32 && $0 < 127 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "=") && $0 != UInt8(ascii: "\\") })
        {
            append(value)
            return
        }
        append(UInt8(ascii: "\""))
        for s in value.prefix(120).unicodeScalars {
            if s == "\"" || s == "\\" {
                append(UInt8(ascii: "\\"))
                append(UInt8(s.value))
            } else if s.value < 32 || s.value == 127 {
                append(UInt8(ascii: "?"))
            } else {
                append(String(s))
            }
        }
        append(UInt8(ascii: "\""))
    }

    /// The line as text.
    public var text: String { String(decoding: UnsafeBufferPointer(rebasing: buffer[..<count]), as: UTF8.self) }

    /// Hands the line to `log` as bytes: the request's line is written without being made a
    /// `String` first (an allocation and a UTF-8 check of every byte, on every request).
    public func write(to log: any LogSink) {
        log.write(utf8: UnsafeBufferPointer(rebasing: buffer[..<count]))
    }
}
