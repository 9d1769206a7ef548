import FoundationEssentials

/// JSON decoding shared by both providers: any decoding failure is `.unparseable`, and the
/// decoder's message is dropped because it can quote body content.
enum ProviderJSON {
    static func decode<T: Decodable>(_ type: T.Type, from body: [UInt8]) throws(ProviderFailure) -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch {
            throw .unparseable
        }
    }

    /// True for 2xx: everything else is reported as `.httpStatus` before the body is looked at,
    /// because error bodies (HTML from a gateway, text from Visual Crossing) have no shape to trust.
    static func isSuccess(_ status: Int) -> Bool { (200..<300).contains(status) }
}
