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

    /// One GET of `url` through `transport`, its answer judged by `report`, given the shorter of
    /// the provider's `timeoutSeconds` and `seconds` (what is left of the fetch's time). A call
    /// cut short so that runs out of time is `.outOfTime`, not `.timeout`: the provider did not
    /// overrun its own timeout, so it is neither paused nor counted as failing for it.
    static func get(
        _ url: String, through transport: any HTTPTransport, timeoutSeconds: Double, within seconds: Double,
        report: (HTTPResult) throws(ProviderFailure) -> WeatherReport
    ) -> ProviderCall {
        let response: HTTPResult
        do {
            response = try transport.get(url, timeoutSeconds: min(timeoutSeconds, seconds))
        } catch {
            return ProviderCall(result: .failure(error == .timeout && seconds < timeoutSeconds ? .outOfTime : error))
        }
        return ProviderCall(result: Result { () throws(ProviderFailure) in try report(response) }, repeated: response.isRepeat)
    }
}
