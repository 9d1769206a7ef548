import WeatherCore

/// What asking one provider came to: its report or why there is none, and whether a request went
/// out for it (not when the transport gave an answer again: `RepeatedCallTransport`).
public struct ProviderCall: Sendable {
    public var result: Result<WeatherReport, ProviderFailure>
    /// False for an answer given again, or a query refused before any call: the counters count no
    /// provider call for it, nor an error.
    public var sent: Bool

    public init(result: Result<WeatherReport, ProviderFailure>, sent: Bool) {
        self.result = result
        self.sent = sent
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
            return ProviderCall(result: .failure(error), sent: true)
        }
        return ProviderCall(result: Result { () throws(ProviderFailure) in try report(response) }, sent: !response.isRepeat)
    }
}
