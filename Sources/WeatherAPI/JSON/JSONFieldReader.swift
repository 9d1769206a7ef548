import WeatherCore

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

    /// The values of `names` in the object `body`, in the same order; nil for absent or null.
    static func strings(_ names: [String], in body: [UInt8]) throws(Failure) -> [String?] {
        var reader = JSONScanner(body, maxDepth: maxDepth)
        var values = [String?](repeating: nil, count: names.count)
        var seen = [Bool](repeating: false, count: names.count)
        var wrongType: String?
        do {
            reader.skipSpace()
            guard reader.peek == UInt8(ascii: "{") else {
                try reader.skipValue(depth: 0)
                reader.skipSpace()
                guard reader.atEnd else { throw JSONScanner.Invalid() }
                throw Failure.notAnObject
            }
            reader.i += 1
            reader.skipSpace()
            if reader.peek == UInt8(ascii: "}") {
                reader.i += 1
            } else {
                repeat {
                    let key = try reader.string()
                    reader.skipSpace()
                    try reader.expect(UInt8(ascii: ":"))
                    reader.skipSpace()
                    if let slot = names.firstIndex(of: key) {
                        guard !seen[slot] else { throw Failure.duplicate(key) }
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
                } while try reader.another(before: UInt8(ascii: "}"))
            }
            reader.skipSpace()
            guard reader.atEnd else { throw JSONScanner.Invalid() }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .invalid
        }
        if let wrongType { throw .wrongType(wrongType) }
        return values
    }
}
