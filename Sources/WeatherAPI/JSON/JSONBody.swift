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
        let contentType = (request.headers["content-type"] ?? "").lowercased()
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingSpaces() } ?? ""
        guard mediaType == "application/json" else { throw .unsupportedMediaType }
        guard !request.body.isEmpty else { throw .invalidRequest("the body must be a JSON object") }
    }
}
