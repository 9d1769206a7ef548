import WeatherCore

/// Caiyun (ColorfulClouds) v2.6 `weather` endpoint: realtime plus up to 15 daily steps.
public struct CaiyunProvider: WeatherProvider {
    /// The provider's name in reports and counters.
    public static let providerName = "caiyun"
    /// Caiyun's daily series has at most this many steps, starting at the location's local today.
    public static let maxDailySteps = 15
    /// The unit system asked for: °C, km/h wind, mm/h everywhere. Caiyun echoes it in `unit`.
    public static let unitSystem = "metric:v2"

    /// Always `caiyun`.
    public var name: String { Self.providerName }

    let baseURL: String
    private let token: String
    private let transport: any HTTPTransport
    let timeoutSeconds: Double

    /// - Parameters:
    ///   - baseURL: e.g. `https://api.caiyunapp.com` (a trailing slash is ignored).
    ///   - token: the API token; it goes into the URL path and nowhere else.
    ///   - timeoutSeconds: deadline for one call (connect included).
    public init(baseURL: String, token: String, transport: any HTTPTransport, timeoutSeconds: Double) {
        precondition(timeoutSeconds > 0 && timeoutSeconds.isFinite, "timeout must be positive")
        self.baseURL = ProviderURL.base(baseURL)
        self.token = token
        self.transport = transport
        self.timeoutSeconds = timeoutSeconds
    }

    /// Whether Caiyun's daily series can hold the trip's dates, decided from the UTC date alone.
    ///
    /// Caiyun's daily steps cover the location's local today through today+14, and local today is
    /// the UTC date ±1 depending on the zone. The gateway does not know the zone before calling,
    /// so it refuses only what cannot work: a trip ending after UTC today+13 (the last day sure to
    /// be in the series everywhere) or starting before UTC today-1 (Caiyun has no past days).
    /// Anything else is asked for, and a day still missing from the answer is `.notCovered` then.
    public func canCover(_ query: WeatherQuery, now: Timestamp) -> Bool {
        switch query {
        case .forecast(let days):
            return days <= Self.maxDailySteps
        case .outlook:
            return true
        case .trip(let start, let end):
            let today = now.utcDate
            return end <= today.adding(days: 13) && start >= today.adding(days: -1)
        }
    }

    /// Caiyun answers 400 for a bad token or API version (its documentation; a bad parameter is
    /// 422), which no query can fix: that pauses Caiyun too.
    public func failsEveryQuery(_ failure: ProviderFailure) -> Bool {
        if case .httpStatus(400, _) = failure { return true }
        return failure.failsEveryQuery
    }

    /// Calls Caiyun for `query` at the snapped `point`; trips Caiyun cannot cover fail with
    /// `.notCovered` before any network call.
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
        guard canCover(query, now: now) else { return ProviderCall(result: .failure(.notCovered)) }  // the chain asks `canCover` first
        return ProviderCall.get(requestURL(for: query, at: point), through: transport, timeoutSeconds: timeoutSeconds, within: seconds) {
            (response) throws(ProviderFailure) in try Self.report(from: response, for: query, at: point, now: now)
        }
    }

    /// `{base}/v2.6/{token}/{lon},{lat}/weather?...`: longitude first, as Caiyun wants it.
    ///
    /// Trips ask for all 15 steps because which step holds which date depends on the zone.
    /// `hourlysteps=1` keeps the unused hourly series as small as Caiyun allows.
    func requestURL(for query: WeatherQuery, at point: GridPoint) -> String {
        let steps: Int
        switch query {
        case .forecast(let days): steps = days
        case .trip, .outlook: steps = Self.maxDailySteps
        }
        return "\(baseURL)/v2.6/\(ProviderURL.encode(token))/"
            + "\(ProviderURL.coordinate(point.lon)),\(ProviderURL.coordinate(point.lat))"
            + "/weather?unit=\(Self.unitSystem)&dailysteps=\(steps)&hourlysteps=1"
    }
}

extension CaiyunProvider: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Names the provider without its token, so `print`, `dump` and string interpolation are safe.
    public var description: String { "CaiyunProvider(baseURL: \(baseURL), token: <redacted>)" }
    /// Same as `description`: the token is never shown.
    public var debugDescription: String { description }
    /// Hides the stored token from `dump` and debuggers' mirrors.
    public var customMirror: Mirror {
        Mirror(self, children: ["baseURL": baseURL, "timeoutSeconds": timeoutSeconds], displayStyle: .struct)
    }
}
