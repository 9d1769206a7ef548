import WeatherCore

/// JSON shared by both providers. Answers are read into a `JSONValue` tree, then into the payload
/// types by hand with the rules `JSONDecoder` applied before (it was the last use of Foundation in
/// the worker): a field that is absent or `null` is nil, unknown fields are ignored, and a field of
/// the wrong type fails the whole answer as `.unparseable`. No message survives a failure,
/// because a decoder's message can quote body content.
enum ProviderJSON {
    /// True for 2xx: everything else is reported as `.httpStatus` before the body is looked at,
    /// because error bodies (HTML from a gateway, text from Visual Crossing) have no shape to trust.
    static func isSuccess(_ status: Int) -> Bool { (200..<300).contains(status) }
}

/// One JSON object of a provider's answer, read field by field.
struct ProviderObject {
    private let members: JSONValue

    init(_ value: JSONValue) throws(ProviderFailure) {
        guard case .object = value else { throw .unparseable }
        members = value
    }

    /// The body's one JSON object. A body the JSON reader refuses (HTML, text, a cut or empty
    /// body; also nesting past 64 or a number beyond a `Double`, which no provider sends) is
    /// `.notJSON`, which pauses the provider; JSON that is not an object is `.unparseable`.
    static func parse(_ body: [UInt8]) throws(ProviderFailure) -> ProviderObject {
        let value: JSONValue
        do {
            value = try JSONValue.parse(body)
        } catch {
            throw .notJSON
        }
        return try ProviderObject(value)
    }

    /// The member `key` unless it is absent or null.
    private func present(_ key: String) -> JSONValue? {
        switch members[key] {
        case nil, .null?: return nil
        case let value?: return value
        }
    }

    func double(_ key: String) throws(ProviderFailure) -> Double? {
        guard let value = present(key) else { return nil }
        guard case .number(let v) = value else { throw .unparseable }
        return v
    }

    /// A whole number (`5` or `5.0`; `5.5` fails).
    func int(_ key: String) throws(ProviderFailure) -> Int? {
        guard let v = try double(key) else { return nil }
        guard let n = Int(exactly: v) else { throw .unparseable }
        return n
    }

    func string(_ key: String) throws(ProviderFailure) -> String? {
        guard let value = present(key) else { return nil }
        guard case .string(let s) = value else { throw .unparseable }
        return s
    }

    /// A string that must be there: an entry without it cannot be placed.
    func requiredString(_ key: String) throws(ProviderFailure) -> String {
        guard let s = try string(key) else { throw .unparseable }
        return s
    }

    func object(_ key: String) throws(ProviderFailure) -> ProviderObject? {
        guard let value = present(key) else { return nil }
        return try ProviderObject(value)
    }

    /// An array whose every element is an object.
    func objects(_ key: String) throws(ProviderFailure) -> [ProviderObject]? {
        guard let value = present(key) else { return nil }
        guard case .array(let elements) = value else { throw .unparseable }
        var out: [ProviderObject] = []
        out.reserveCapacity(elements.count)
        for element in elements { out.append(try ProviderObject(element)) }
        return out
    }
}
