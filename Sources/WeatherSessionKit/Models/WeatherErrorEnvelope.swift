/// The error body every gateway failure carries: `{"error": {"code": "...", "message": "..."}}`.
///
/// Decoded by the kit and surfaced as ``WeatherAPIError``; exposed so that callers with their own
/// transport code can decode it the same way.
public struct WeatherErrorEnvelope: Sendable, Equatable, Codable {
    /// The inner object of the envelope.
    public struct Body: Sendable, Equatable, Codable {
        /// A stable `snake_case` code, for programs (`unauthorized`, `rate_limited`, ...).
        public var code: String
        /// An explanation for a person; not stable, not localised.
        public var message: String

        /// Creates the inner object.
        public init(code: String, message: String) {
            self.code = code
            self.message = message
        }
    }

    /// The error itself.
    public var error: Body

    /// Creates an envelope.
    public init(code: String, message: String) {
        self.error = Body(code: code, message: message)
    }
}
