import WeatherCore

/// Visual Crossing Timeline API: current conditions and days, forecast or statistics.
public struct VisualCrossingProvider: WeatherProvider {
    /// The provider's name in reports and counters.
    public static let providerName = "visualcrossing"

    /// Always `visualcrossing`.
    public var name: String { Self.providerName }

    let baseURL: String
    private let apiKey: String
    private let transport: any HTTPTransport
    let timeoutSeconds: Double

    /// - Parameters:
    ///   - baseURL: e.g. `https://weather.visualcrossing.com` (a trailing slash is ignored).
    ///   - apiKey: the API key; percent-encoded into the query and used nowhere else.
    ///   - timeoutSeconds: deadline for one call (connect included).
    public init(baseURL: String, apiKey: String, transport: any HTTPTransport, timeoutSeconds: Double) {
        precondition(timeoutSeconds > 0 && timeoutSeconds.isFinite, "timeout must be positive")
        self.baseURL = ProviderURL.base(baseURL)
        self.apiKey = apiKey
        self.transport = transport
        self.timeoutSeconds = timeoutSeconds
    }

    /// Calls Visual Crossing for `query` at the snapped `point`. Visual Crossing serves any date
    /// (forecast, history, statistics), so it relies on the default `canCover` (always true).
    public func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) throws(ProviderFailure) -> WeatherReport {
        try call(query, at: point, now: now).result.get()
    }

    /// `fetch`, saying whether a request went out: an outlook and `days=15` are the same URL, and
    /// the transport may give the second the first one's answer (`RepeatedCallTransport`).
    public func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) -> ProviderCall {
        call(query, at: point, now: now, within: timeoutSeconds)
    }

    /// `call` with the shorter of `timeoutSeconds` and `seconds` (`ProviderCall.get`).
    public func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> ProviderCall {
        ProviderCall.get(requestURL(for: query, at: point), through: transport, timeoutSeconds: timeoutSeconds, within: seconds) {
            (response) throws(ProviderFailure) in try Self.report(from: response, for: query, at: point, now: now)
        }
    }

    /// `.../timeline/{lat},{lon}[/{start}/{end}]?unitGroup=metric&include=current,days&key=K&contentType=json&iconSet=icons2`.
    ///
    /// A forecast sends no dates: the default answer is 15 days from the location's local today,
    /// which is what "today" means to the client, whereas any date the gateway picked would be UTC.
    /// `unitGroup=metric` is explicit because the default is `us` (Fahrenheit). `iconSet=icons2`
    /// (after API.md's parameters) asks for the richer icons: the default set has no thunder,
    /// sleet, showers or hail, so `thunderstorm` and `sleet` could never come from Visual Crossing.
    func requestURL(for query: WeatherQuery, at point: GridPoint) -> String {
        var url =
            "\(baseURL)/VisualCrossingWebServices/rest/services/timeline/"
            + "\(ProviderURL.coordinate(point.lat)),\(ProviderURL.coordinate(point.lon))"
        if case .trip(let start, let end) = query {
            url += "/\(start)/\(end)"
        }
        return url + "?unitGroup=metric&include=current,days&key=\(ProviderURL.encode(apiKey))&contentType=json&iconSet=icons2"
    }
}

extension VisualCrossingProvider: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Names the provider without its key, so `print`, `dump` and string interpolation are safe.
    public var description: String { "VisualCrossingProvider(baseURL: \(baseURL), apiKey: <redacted>)" }
    /// Same as `description`: the key is never shown.
    public var debugDescription: String { description }
    /// Hides the stored key from `dump` and debuggers' mirrors.
    public var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL, "timeoutSeconds": timeoutSeconds], displayStyle: .struct)
    }
}
