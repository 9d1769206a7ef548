import Foundation

/// Fetches forecasts from the gateway, authenticated by a ``WeatherSessionService``.
///
/// Each call asks the service for an access token and sends it as `X-Weather-Session-Token`
/// (never the legacy shared `X-Weather-Token`). If the gateway still answers 401 (the session
/// was revoked by an operator, or the token expired in transit), the client asks the service
/// for a new token once and retries once; a second 401 is thrown, never looped on.
///
/// Errors: ``WeatherAPIError`` when the gateway answered with an error (400 for a bad
/// coordinate, 429 with `retryAfter`, 502/503/504 provider trouble); the transport's own error
/// when there was no answer.
///
/// ```swift
/// let client = WeatherClient(service: service)
/// let today = try await client.weather(lat: 31.2304, lon: 121.4737, days: 2)
/// let trip = try await client.trip(
///     lat: 35.68, lon: 139.69,
///     start: CalendarDate("2026-12-20")!, end: CalendarDate("2026-12-24")!)
/// ```
public struct WeatherClient: Sendable {
    /// The header that carries the per-session access token.
    public static let sessionTokenHeader = "X-Weather-Session-Token"

    /// The service that supplies, and renews, access tokens.
    public let service: WeatherSessionService
    /// Decimals coordinates are rounded to before they leave the phone (see ``init(service:coordinateDecimals:)``).
    public let coordinateDecimals: Int

    /// Creates a client that talks to the same gateway and transport as `service`.
    ///
    /// - Parameter coordinateDecimals: coordinates are rounded to this many decimals before they
    ///   are sent: 2 (about 1 km) by default. The gateway snaps them to its grid
    ///   (`WEATHER_GRID_DEGREES`, 0.05° by default) anyway, so more digits only put a more precise
    ///   position into the URL, and so into any log or error that records it. Use 3 only for a
    ///   gateway whose grid is finer than 0.01°.
    public init(service: WeatherSessionService, coordinateDecimals: Int = 2) {
        precondition((0...6).contains(coordinateDecimals), "coordinateDecimals must be 0...6")
        self.service = service
        self.coordinateDecimals = coordinateDecimals
    }

    /// Current conditions and the next `days` days (1...15; `nil` for the server default of 7).
    ///
    /// Coordinates are sent rounded to ``coordinateDecimals`` (2: about 1 km); the gateway snaps
    /// them to its ~5 km grid before using them and returns the snapped point in `location`.
    public func weather(lat: Double, lon: Double, days: Int? = nil) async throws -> WeatherResponse {
        var query = coordinates(lat: lat, lon: lon)
        if let days {
            query.append(URLQueryItem(name: "days", value: String(days)))
        }
        return try await authorizedGet("/v1/weather", query: query)
    }

    /// The days `start...end` (both included, at most 15, within a year) at a destination.
    /// The response has no `current`.
    public func trip(lat: Double, lon: Double, start: CalendarDate, end: CalendarDate) async throws -> WeatherResponse {
        var query = coordinates(lat: lat, lon: lon)
        query.append(URLQueryItem(name: "start", value: start.description))
        query.append(URLQueryItem(name: "end", value: end.description))
        return try await authorizedGet("/v1/weather/trip", query: query)
    }

    private func authorizedGet(_ path: String, query: [URLQueryItem]) async throws -> WeatherResponse {
        let connection = service.connection
        let token = try await service.accessToken()
        // A caller cancelled while it waited for a renewal (which runs to its end regardless,
        // so its tokens are kept) sends nothing more.
        try Task.checkCancellation()
        var response = try await connection.get(path, query: query, sessionToken: token)
        if response.status == 401 {
            // Exactly one renewal and one retry. Passing the rejected token lets concurrent
            // callers that all got 401 for it share a single refresh.
            let renewed = try await service.refreshAccessToken(rejecting: token)
            try Task.checkCancellation()
            response = try await connection.get(path, query: query, sessionToken: renewed)
        }
        return try WeatherGatewayConnection.decodeSuccess(WeatherResponse.self, from: response)
    }

    private func coordinates(lat: Double, lon: Double) -> [URLQueryItem] {
        [
            URLQueryItem(name: "lat", value: Self.decimal(lat, decimals: coordinateDecimals)),
            URLQueryItem(name: "lon", value: Self.decimal(lon, decimals: coordinateDecimals)),
        ]
    }

    /// Plain decimal notation rounded to `decimals`, never an exponent (`1e-05`) the server
    /// would reject.
    static func decimal(_ value: Double, decimals: Int) -> String {
        guard value.isFinite else { return String(value) }  // the server answers 400, as it should
        let scale = pow(10, Double(decimals))
        let rounded = (value * scale).rounded() / scale
        let text = String(format: "%.\(decimals)f", rounded == 0 ? 0 : rounded)  // no "-0.00"
        // Trim trailing zeros: 31.20 -> 31.2, 8.00 -> 8.
        guard decimals > 0 else { return text }
        var trimmed = Substring(text)
        while trimmed.hasSuffix("0") { trimmed.removeLast() }
        if trimmed.hasSuffix(".") { trimmed.removeLast() }
        return String(trimmed)
    }
}
