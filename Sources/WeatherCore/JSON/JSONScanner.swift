/// The lexer of strict RFC 8259 JSON, on bytes, shared by the session-body reader
/// (`JSONFieldReader`) and `JSONValue`:
/// - strings must be valid UTF-8 without raw control characters, escapes must be complete, and a
///   `\u` surrogate must come in a pair;
/// - numbers follow the grammar exactly (no leading `+`, no leading zeros, no bare `.5`);
/// - objects and arrays nest at most `maxDepth` deep.
public struct JSONScanner {
    /// Not JSON, or nested deeper than allowed.
    public struct Invalid: Error, Equatable {
        public init() {}
    }

    /// The text being read.
    public let bytes: [UInt8]
    /// How deep objects and arrays may nest.
    public let maxDepth: Int
    /// The cursor: the index of the next byte to read.
    public var i = 0

    /// A scanner at the start of `bytes`.
    public init(_ bytes: [UInt8], maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    /// True when every byte has been read.
    public var atEnd: Bool { i >= bytes.count }
    /// The next byte, not consumed; nil at the end.
    public var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

    /// Moves past JSON's whitespace (space, tab, line feed, carriage return).
    public mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { i += 1 }
    }

    /// Consumes `byte`, or throws when the next byte is another.
    public mutating func expect(_ byte: UInt8) throws(Invalid) {
        guard peek == byte else { throw Invalid() }
        i += 1
    }

    /// Consumes `word` (`true`, `false`, `null`), or throws when the bytes differ.
    public mutating func literal(_ word: StaticString) throws(Invalid) {
        let count = word.utf8CodeUnitCount
        guard i + count <= bytes.count else { throw Invalid() }
        for k in 0..<count where bytes[i + k] != word.utf8Start[k] { throw Invalid() }
        i += count
    }

    /// After an element of an object or array: true when a `,` (another element) follows,
    /// false when `close` ends it.
    public mutating func another(before close: UInt8) throws(Invalid) -> Bool {
        skipSpace()
        if peek == UInt8(ascii: ",") {
            i += 1
            skipSpace()
            return true
        }
        try expect(close)
        return false
    }

    /// Any JSON value, passed over; objects and arrays at `depth` count towards `maxDepth`.
    public mutating func skipValue(depth: Int) throws(Invalid) {
        guard let b = peek else { throw Invalid() }
        switch b {
        case UInt8(ascii: "\""):
            _ = try string()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < maxDepth else { throw Invalid() }
            let close = b == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            i += 1
            skipSpace()
            if peek == close {
                i += 1
                return
            }
            repeat {
                if close == UInt8(ascii: "}") {
                    _ = try string()
                    skipSpace()
                    try expect(UInt8(ascii: ":"))
                    skipSpace()
                }
                try skipValue(depth: depth + 1)
            } while try another(before: close)
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: _ = try number()
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; returns where its text is in `bytes`.
    public mutating func number() throws(Invalid) -> Range<Int> {
        let start = i
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        if peek == UInt8(ascii: "-") { i += 1 }
        guard let first = peek, isDigit(first) else { throw Invalid() }
        i += 1
        if first != UInt8(ascii: "0") {
            while let d = peek, isDigit(d) { i += 1 }
        }
        if peek == UInt8(ascii: ".") {
            i += 1
            guard let d = peek, isDigit(d) else { throw Invalid() }
            while let d = peek, isDigit(d) { i += 1 }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            i += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
            guard let d = peek, isDigit(d) else { throw Invalid() }
            while let d = peek, isDigit(d) { i += 1 }
        }
        return start..<i
    }

    /// A string at the cursor, unescaped; invalid UTF-8 and lone surrogates are refused.
    public mutating func string() throws(Invalid) -> String {
        try expect(UInt8(ascii: "\""))
        let start = i
        // Fast path: no escapes, the bytes are the string.
        while let b = peek, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") {
            guard b >= 0x20 else { throw Invalid() }
            i += 1
        }
        guard let stop = peek else { throw Invalid() }
        var out = Array(bytes[start..<i])
        if stop == UInt8(ascii: "\\") {
            while true {
                guard let b = peek else { throw Invalid() }
                i += 1
                switch b {
                case UInt8(ascii: "\""):
                    return try Self.text(out)
                case UInt8(ascii: "\\"):
                    guard let e = peek else { throw Invalid() }
                    i += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"): try unicodeEscape(into: &out)
                    default: throw Invalid()
                    }
                default:
                    guard b >= 0x20 else { throw Invalid() }
                    out.append(b)
                }
            }
        }
        i += 1  // the closing quote
        return try Self.text(out)
    }

    /// After `\u`: four hex digits, and for a high surrogate the `\u` low surrogate after it.
    private mutating func unicodeEscape(into out: inout [UInt8]) throws(Invalid) {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { throw Invalid() }
            i += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw Invalid() }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw Invalid()
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw Invalid() }
        out.append(contentsOf: UTF8.encode(unicode)!)
    }

    private mutating func hex4() throws(Invalid) -> UInt32 {
        guard i + 4 <= bytes.count else { throw Invalid() }
        var value: UInt32 = 0
        for _ in 0..<4 {
            guard let digit = Hex.value(ofDigit: bytes[i]) else { throw Invalid() }
            i += 1
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    private static func text(_ utf8: [UInt8]) throws(Invalid) -> String {
        guard let text = utf8.withUnsafeBufferPointer(validUTF8String) else { throw Invalid() }
        return text
    }
}
