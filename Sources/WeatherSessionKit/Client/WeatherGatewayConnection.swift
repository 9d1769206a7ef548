import Foundation

/// Where the gateway lives and how to reach it; the one place that builds URLs, encodes bodies
/// and reads answers, shared by ``WeatherSessionService`` and ``WeatherClient``.
struct WeatherGatewayConnection: Sendable {
    /// The gateway root, possibly with a mount prefix: `https://example.com/api`.
    let baseURL: URL
    let transport: any WeatherHTTPTransport

    init(baseURL: URL, transport: any WeatherHTTPTransport) {
        precondition(
            ["http", "https"].contains(baseURL.scheme?.lowercased() ?? ""),
            "WeatherSessionKit base URL must be http(s)://host[/prefix]"
        )
        self.baseURL = baseURL
        self.transport = transport
    }

    /// `baseURL` + `path` (which starts with `/v1/`), keeping the base URL's mount prefix.
    func url(_ path: String, query: [URLQueryItem] = []) -> URL {
        guard var components = URLComponents(url: baseURL, resolvingAgainstBaseURL: true) else {
            preconditionFailure("WeatherSessionKit base URL is not a valid URL")
        }
        var prefix = components.path
        while prefix.hasSuffix("/") { prefix.removeLast() }
        components.path = prefix + path
        components.queryItems = query.isEmpty ? nil : query
        components.fragment = nil
        guard let url = components.url else {
            preconditionFailure("WeatherSessionKit could not build a URL for \(path)")
        }
        return url
    }

    /// POSTs `body` as JSON and returns the answer, whatever its status.
    func post(_ path: String, json body: some Encodable) async throws -> WeatherHTTPResponse {
        let request = WeatherHTTPRequest(
            method: "POST",
            url: url(path),
            headers: [
                "Content-Type": "application/json; charset=utf-8",
                "Accept": "application/json",
            ],
            body: try WeatherJSON.encoder().encode(body)
        )
        return try await transport.send(request)
    }

    /// GETs a weather route with the session token and returns the answer, whatever its status.
    func get(_ path: String, query: [URLQueryItem], sessionToken: String) async throws -> WeatherHTTPResponse {
        let request = WeatherHTTPRequest(
            method: "GET",
            url: url(path, query: query),
            headers: [
                WeatherClient.sessionTokenHeader: sessionToken,
                "Accept": "application/json",
            ]
        )
        return try await transport.send(request)
    }

    /// The decoded body of a 2xx answer; any other status becomes a ``WeatherAPIError``.
    static func decodeSuccess<Body: Decodable>(_ type: Body.Type, from response: WeatherHTTPResponse) throws -> Body {
        guard response.isSuccess else {
            throw WeatherAPIError(response: response)
        }
        do {
            return try WeatherJSON.decoder().decode(Body.self, from: response.body)
        } catch {
            throw WeatherAPIError(
                status: response.status,
                code: WeatherAPIError.Code.unexpectedResponse,
                message: "HTTP \(response.status) body is not a valid \(Body.self)"
            )
        }
    }
}

/// `POST /v1/weather/session` body.
struct CreateSessionRequest: Encodable {
    var platform: String
    var appVersion: String?
    var installationId: String
}

/// `POST /v1/weather/session/refresh` and `.../revoke` body.
struct SessionTokenRequest: Encodable {
    var anonymousSessionId: String
    var refreshToken: String

    init(_ session: WeatherSession) {
        anonymousSessionId = session.anonymousSessionId
        refreshToken = session.refreshToken
    }
}
