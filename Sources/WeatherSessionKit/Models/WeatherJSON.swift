import Foundation

/// The JSON settings of the wire format, in one place for every request and response.
enum WeatherJSON {
    /// Decodes gateway responses: times are ISO 8601 UTC with seconds precision (`...T20:00:00Z`).
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }

    /// Encodes request bodies; sorted keys keep them byte-for-byte reproducible.
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}
