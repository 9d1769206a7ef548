import FoundationEssentials
import WeatherCore

/// Reads a small JSON request body into a `Decodable` type, turning every failure into a 400
/// (or 415) whose message names the field.
enum JSONBody {
    static func decode<T: Decodable>(_ type: T.Type, from request: Request) throws(HTTPError) -> T {
        let contentType = (request.headers["content-type"] ?? "").lowercased()
        let mediaType = contentType.split(separator: ";").first.map { $0.trimmingSpaces() } ?? ""
        guard mediaType == "application/json" else { throw .unsupportedMediaType }
        guard !request.body.isEmpty else { throw .invalidRequest("the body must be a JSON object") }
        do {
            return try JSONDecoder().decode(T.self, from: Data(request.body))
        } catch let DecodingError.typeMismatch(_, ctx) {
            throw .invalidRequest(ctx.codingPath.isEmpty ? "the body must be a JSON object" : "field \(path(ctx.codingPath)) has the wrong type")
        } catch let DecodingError.valueNotFound(_, ctx) {
            throw .invalidRequest("field \(path(ctx.codingPath)) must not be null")
        } catch let DecodingError.keyNotFound(key, _) {
            throw .invalidRequest("field \(key.stringValue) is required")
        } catch {
            throw .invalidRequest("the body is not valid JSON")
        }
    }

    static func path(_ keys: [any CodingKey]) -> String { keys.map(\.stringValue).joined(separator: ".") }
}
