/// Reads the string fields of a small flat JSON object (a session request body) straight from
/// its bytes, validating the whole document as JSON (RFC 8259) on the way.
///
/// It replaced `JSONDecoder` for the three session bodies, whose decoding took 6.8% of a worker's
/// CPU while creating sessions (perf, bench/RESULTS.md). What it accepts and refuses:
/// - the document must be one JSON object, with only whitespace around it;
/// - a wanted field is a string, or `null` (treated as absent); any other type is reported;
/// - a wanted field given twice is refused, rather than silently taking one of the two;
/// - other fields may hold any JSON value, nested at most `maxDepth` deep, and are skipped;
/// - strings must be valid UTF-8 without raw control characters, escapes must be complete, and
///   a `\u` surrogate must come in a pair.
struct JSONFieldReader {
    enum Failure: Error, Equatable {
        /// Not JSON at all (or nested too deep).
        case invalid
        /// Valid JSON, but not an object.
        case notAnObject
        /// A wanted field holds something other than a string or null.
        case wrongType(String)
        /// A wanted field appears twice.
        case duplicate(String)
    }

    static let maxDepth = 32

    private let bytes: [UInt8]
    private var i = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The values of `names` in the object `body`, in the same order; nil for absent or null.
    static func strings(_ names: [String], in body: [UInt8]) throws(Failure) -> [String?] {
        var reader = JSONFieldReader(body)
        var values = [String?](repeating: nil, count: names.count)
        var seen = [Bool](repeating: false, count: names.count)
        var wrongType: String?
        reader.skipSpace()
        guard reader.peek == UInt8(ascii: "{") else {
            try reader.skipValue(depth: 0)
            reader.skipSpace()
            guard reader.atEnd else { throw .invalid }
            throw .notAnObject
        }
        reader.i += 1
        reader.skipSpace()
        if reader.peek == UInt8(ascii: "}") {
            reader.i += 1
        } else {
            while true {
                reader.skipSpace()
                let key = try reader.string()
                reader.skipSpace()
                try reader.expect(UInt8(ascii: ":"))
                reader.skipSpace()
                if let slot = names.firstIndex(of: key) {
                    guard !seen[slot] else { throw .duplicate(key) }
                    seen[slot] = true
                    switch reader.peek {
                    case UInt8(ascii: "\""): values[slot] = try reader.string()
                    case UInt8(ascii: "n"): try reader.literal("null")
                    default:
                        try reader.skipValue(depth: 1)
                        if wrongType == nil { wrongType = key }
                    }
                } else {
                    try reader.skipValue(depth: 1)
                }
                reader.skipSpace()
                if reader.peek == UInt8(ascii: ",") {
                    reader.i += 1
                    continue
                }
                try reader.expect(UInt8(ascii: "}"))
                break
            }
        }
        reader.skipSpace()
        guard reader.atEnd else { throw .invalid }
        if let wrongType { throw .wrongType(wrongType) }
        return values
    }

    private var atEnd: Bool { i >= bytes.count }
    private var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

    private mutating func skipSpace() {
        while let b = peek, b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D { i += 1 }
    }

    private mutating func expect(_ byte: UInt8) throws(Failure) {
        guard peek == byte else { throw .invalid }
        i += 1
    }

    private mutating func literal(_ word: StaticString) throws(Failure) {
        let count = word.utf8CodeUnitCount
        guard i + count <= bytes.count else { throw .invalid }
        for k in 0..<count where bytes[i + k] != word.utf8Start[k] { throw .invalid }
        i += count
    }

    /// Any JSON value; objects and arrays count towards the depth limit.
    private mutating func skipValue(depth: Int) throws(Failure) {
        guard let b = peek else { throw .invalid }
        switch b {
        case UInt8(ascii: "\""):
            _ = try string()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            guard depth < Self.maxDepth else { throw .invalid }
            let close = b == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
            i += 1
            skipSpace()
            if peek == close {
                i += 1
                return
            }
            while true {
                skipSpace()
                if close == UInt8(ascii: "}") {
                    _ = try string()
                    skipSpace()
                    try expect(UInt8(ascii: ":"))
                    skipSpace()
                }
                try skipValue(depth: depth + 1)
                skipSpace()
                if peek == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                try expect(close)
                return
            }
        case UInt8(ascii: "t"): try literal("true")
        case UInt8(ascii: "f"): try literal("false")
        case UInt8(ascii: "n"): try literal("null")
        default: try number()
        }
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    private mutating func number() throws(Failure) {
        let isDigit: (UInt8) -> Bool = { $0 >= 0x30 && $0 <= 0x39 }
        if peek == UInt8(ascii: "-") { i += 1 }
        guard let first = peek, isDigit(first) else { throw .invalid }
        i += 1
        if first != UInt8(ascii: "0") {
            while let d = peek, isDigit(d) { i += 1 }
        }
        if peek == UInt8(ascii: ".") {
            i += 1
            guard let d = peek, isDigit(d) else { throw .invalid }
            while let d = peek, isDigit(d) { i += 1 }
        }
        if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
            i += 1
            if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
            guard let d = peek, isDigit(d) else { throw .invalid }
            while let d = peek, isDigit(d) { i += 1 }
        }
    }

    /// A string at the cursor, unescaped; invalid UTF-8 and lone surrogates are refused.
    private mutating func string() throws(Failure) -> String {
        try expect(UInt8(ascii: "\""))
        let start = i
        // Fast path: no escapes, the bytes are the string.
        while let b = peek, b != UInt8(ascii: "\""), b != UInt8(ascii: "\\") {
            guard b >= 0x20 else { throw .invalid }
            i += 1
        }
        guard let stop = peek else { throw .invalid }
        var out = Array(bytes[start..<i])
        if stop == UInt8(ascii: "\\") {
            while true {
                guard let b = peek else { throw .invalid }
                i += 1
                switch b {
                case UInt8(ascii: "\""):
                    return try Self.text(out)
                case UInt8(ascii: "\\"):
                    guard let e = peek else { throw .invalid }
                    i += 1
                    switch e {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
                    case UInt8(ascii: "b"): out.append(0x08)
                    case UInt8(ascii: "f"): out.append(0x0C)
                    case UInt8(ascii: "n"): out.append(0x0A)
                    case UInt8(ascii: "r"): out.append(0x0D)
                    case UInt8(ascii: "t"): out.append(0x09)
                    case UInt8(ascii: "u"): try unicodeEscape(into: &out)
                    default: throw .invalid
                    }
                default:
                    guard b >= 0x20 else { throw .invalid }
                    out.append(b)
                }
            }
        }
        i += 1  // the closing quote
        return try Self.text(out)
    }

    /// After `\u`: four hex digits, and for a high surrogate the `\u` low surrogate after it.
    private mutating func unicodeEscape(into out: inout [UInt8]) throws(Failure) {
        var scalar = try hex4()
        if (0xD800...0xDBFF).contains(scalar) {
            guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else { throw .invalid }
            i += 2
            let low = try hex4()
            guard (0xDC00...0xDFFF).contains(low) else { throw .invalid }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw .invalid
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw .invalid }
        out.append(contentsOf: UTF8.encode(unicode)!)
    }

    private mutating func hex4() throws(Failure) -> UInt32 {
        guard i + 4 <= bytes.count else { throw .invalid }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let d = bytes[i]
            i += 1
            switch d {
            case 0x30...0x39: value = value << 4 | UInt32(d - 0x30)
            case 0x41...0x46: value = value << 4 | UInt32(d - 0x37)
            case 0x61...0x66: value = value << 4 | UInt32(d - 0x57)
            default: throw .invalid
            }
        }
        return value
    }

    private static func text(_ utf8: [UInt8]) throws(Failure) -> String {
        guard let text = String(validating: utf8, as: UTF8.self) else { throw .invalid }
        return text
    }
}
