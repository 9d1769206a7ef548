import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A ``WeatherHTTPTransport`` backed by `URLSession`.
///
/// By default it uses its own ephemeral session: no cookies, no disk cache, no credential
/// storage. Token responses already say `Cache-Control: no-store`; the ephemeral session makes
/// sure nothing token-shaped reaches the disk even if a proxy drops that header.
public struct URLSessionWeatherTransport: WeatherHTTPTransport {
    private let session: URLSession
    private let timeout: TimeInterval

    /// Creates a transport.
    /// - Parameters:
    ///   - session: the session to use; `nil` makes a private ephemeral one.
    ///   - timeout: seconds before one request gives up. The gateway answers from cache or fails a
    ///     provider within a few seconds, so the default of 15 s only trips on a dead network.
    ///     With the private session it bounds the whole exchange; a request's own
    ///     `timeoutInterval` only bounds idle time (on Apple platforms a transfer that trickles
    ///     may otherwise run on for the configuration's resource timeout, seven days by default),
    ///     so pass a `session` whose `timeoutIntervalForResource` is short too.
    public init(session: URLSession? = nil, timeout: TimeInterval = 15) {
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = timeout
            configuration.timeoutIntervalForResource = timeout
            self.session = URLSession(configuration: configuration)
        }
        self.timeout = timeout
    }

    /// Sends the request and returns the answer, whatever its status.
    public func send(_ request: WeatherHTTPRequest) async throws -> WeatherHTTPResponse {
        var urlRequest = URLRequest(
            url: request.url,
            cachePolicy: .reloadIgnoringLocalCacheData,
            timeoutInterval: timeout
        )
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }

        let (body, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else {
            throw URLError(.badServerResponse)
        }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String {
                headers[name] = value
            }
        }
        return WeatherHTTPResponse(status: http.statusCode, headers: headers, body: body)
    }
}
