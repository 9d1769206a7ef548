import WeatherCore

/// What asking one provider came to: its report or why there is none, and whether it was judged
/// on the answer to the same call moments earlier instead of a request of its own
/// (`RepeatedCallTransport`).
public struct ProviderCall: Sendable {
    public var result: Result<WeatherReport, ProviderFailure>
    /// No request went out (`ProviderAttempt.repeated`): the counters count no call or error for
    /// it, and it pauses nobody.
    public var repeated: Bool

    public init(result: Result<WeatherReport, ProviderFailure>, repeated: Bool = false) {
        self.result = result
        self.repeated = repeated
    }

    /// One GET of `url` through `transport`, its answer judged by `report`.
    static func get(
        _ url: String, through transport: any HTTPTransport, timeoutSeconds: Double,
        report: (HTTPResult) throws(ProviderFailure) -> WeatherReport
    ) -> ProviderCall {
        let response: HTTPResult
        do {
            response = try transport.get(url, timeoutSeconds: timeoutSeconds)
        } catch {
            return ProviderCall(result: .failure(error))
        }
        return ProviderCall(result: Result { () throws(ProviderFailure) in try report(response) }, repeated: response.isRepeat)
    }
}
