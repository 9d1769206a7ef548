import WeatherCore

/// Reads a small JSON request body, turning every failure into a 400 (or 415) whose message
/// names the field.
enum JSONBody {
    /// The string fields `names` of the body's JSON object, in that order; nil when absent or null.
    /// The session bodies use this (`JSONFieldReader`: no decoder, no reflection).
    static func strings(_ names: [String], from request: Request) throws(HTTPError) -> [String?] {
        try checkMediaType(request)
        do {
            return try JSONFieldReader.strings(names, in: request.body)
        } catch .notAnObject {
            throw .invalidRequest("the body must be a JSON object")
        } catch .wrongType(let field) {
            throw .invalidRequest("field \(field) has the wrong type")
        } catch .duplicate(let field) {
            throw .invalidRequest("field \(field) must appear only once")
        } catch {
            throw .invalidRequest("the body is not valid JSON")
        }
    }

    private static func checkMediaType(_ request: Request) throws(HTTPError) {
        guard isJSONMediaType(request.headers["content-type"] ?? "") else { throw .unsupportedMediaType }
        guard !request.body.isEmpty else { throw .invalidRequest("the body must be a JSON object") }
    }

    /// True when a Content-Type value names `application/json` (in any letter case), with or
    /// without parameters after a `;` and with spaces, tabs or carriage returns around the type
    /// (the rule the string version applied). On the bytes: lowercasing and splitting the string
    /// was 4% of creating a session.
    static func isJSONMediaType(_ value: String) -> Bool {
        let expected = "application/json".utf8
        var value = value
        return value.withUTF8 { v in
            func isSpace(_ c: UInt8) -> Bool { c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") }
            var start = 0, end = v.firstIndex(of: UInt8(ascii: ";")) ?? v.count
            while start < end, isSpace(v[start]) { start += 1 }
            while end > start, isSpace(v[end - 1]) { end -= 1 }
            guard end - start == expected.count else { return false }
            // Each byte is the expected one, or the capital of an expected lowercase letter.
            return zip(v[start..<end], expected).allSatisfy { c, e in c == e || (e >= 0x61 && e <= 0x7a && c == e - 0x20) }
        }
    }
}
