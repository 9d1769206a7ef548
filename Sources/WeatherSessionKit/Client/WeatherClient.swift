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

    /// Creates a client that talks to the same gateway and transport as `service`.
    public init(service: WeatherSessionService) {
        self.service = service
    }

    /// Current conditions and the next `days` days (1...15; `nil` for the server default of 7).
    ///
    /// Coordinates are sent with four decimals (about 11 m); the gateway snaps them to its
    /// ~5 km grid before using them and returns the snapped point in `location`.
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
        var response = try await connection.get(path, query: query, sessionToken: token)
        if response.status == 401 {
            // Exactly one renewal and one retry. Passing the rejected token lets concurrent
            // callers that all got 401 for it share a single refresh.
            let renewed = try await service.refreshAccessToken(rejecting: token)
            response = try await connection.get(path, query: query, sessionToken: renewed)
        }
        return try WeatherGatewayConnection.decodeSuccess(WeatherResponse.self, from: response)
    }

    private func coordinates(lat: Double, lon: Double) -> [URLQueryItem] {
        [
            URLQueryItem(name: "lat", value: Self.decimal(lat)),
            URLQueryItem(name: "lon", value: Self.decimal(lon)),
        ]
    }

    /// Plain decimal notation, never an exponent (`1e-05`) the server would reject.
    static func decimal(_ value: Double) -> String {
        guard value.isFinite else { return String(value) }  // the server answers 400, as it should
        let rounded = (value * 10_000).rounded() / 10_000
        let text = String(format: "%.4f", rounded == 0 ? 0 : rounded)  // no "-0.0000"
        // Trim trailing zeros: 31.2300 -> 31.23, 8.0000 -> 8.
        var trimmed = Substring(text)
        while trimmed.hasSuffix("0") { trimmed.removeLast() }
        if trimmed.hasSuffix(".") { trimmed.removeLast() }
        return String(trimmed)
    }
}
