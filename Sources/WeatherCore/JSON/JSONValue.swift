/// A JSON document (RFC 8259, read strictly by `JSONScanner`) as a tree: what the providers'
/// answers are read into. It replaced `JSONDecoder`, the last use of Foundation in the worker.
///
/// Numbers are `Double`s and must be representable: `1e400` and `1e-400` are refused, as
/// `JSONDecoder` refuses them. An object keeps its members in
/// document order, duplicates included; `self[key]` finds the first, as `JSONDecoder` does.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([Member])

    public struct Member: Sendable, Equatable {
        public var key: String
        public var value: JSONValue

        public init(_ key: String, _ value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// Deep enough for any provider answer; a provider's body is also capped in size.
    public static let defaultMaxDepth = 64

    /// The one JSON value of `bytes`, with nothing but whitespace around it.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONScanner.Invalid) -> JSONValue {
        var scanner = JSONScanner(bytes, maxDepth: maxDepth)
        scanner.skipSpace()
        let value = try scanner.value(depth: 0)
        scanner.skipSpace()
        guard scanner.atEnd else { throw JSONScanner.Invalid() }
        return value
    }

    /// The first member named `key` of an object; nil when there is none, or this is no object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }
}

extension JSONScanner {
    /// The value at the cursor, built; objects and arrays at `depth` count towards `maxDepth`.
    mutating func value(depth: Int) throws(Invalid) -> JSONValue {
        guard let b = peek else { throw Invalid() }
        switch b {
        case UInt8(ascii: "\""):
            return .string(try string())
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw Invalid() }
            i += 1
            skipSpace()
            var members: [JSONValue.Member] = []
            if peek == UInt8(ascii: "}") {
                i += 1
                return .object(members)
            }
            repeat {
                let key = try string()
                skipSpace()
                try expect(UInt8(ascii: ":"))
                skipSpace()
                members.append(JSONValue.Member(key, try value(depth: depth + 1)))
            } while try another(before: UInt8(ascii: "}"))
            return .object(members)
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw Invalid() }
            i += 1
            skipSpace()
            var elements: [JSONValue] = []
            if peek == UInt8(ascii: "]") {
                i += 1
                return .array(elements)
            }
            repeat {
                elements.append(try value(depth: depth + 1))
            } while try another(before: UInt8(ascii: "]"))
            return .array(elements)
        case UInt8(ascii: "t"):
            try literal("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try literal("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            let span = try number()
            guard let v = Double(String(decoding: bytes[span], as: UTF8.self)), v.isFinite else { throw Invalid() }
            // Too small for a Double (`1e-400`) is refused like too large, not read as 0.
            if v == 0,
                bytes[span].prefix(while: { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") })
                    .contains(where: { $0 >= UInt8(ascii: "1") && $0 <= UInt8(ascii: "9") })
            {
                throw Invalid()
            }
            return .number(v)
        }
    }
}
