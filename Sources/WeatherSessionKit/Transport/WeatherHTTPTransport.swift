import Foundation

/// The one way WeatherSessionKit talks to the network: send a request, get the response back.
///
/// The production implementation is ``URLSessionWeatherTransport``. Tests implement this protocol
/// with a scripted fake server, which is why nothing in the kit needs a real socket or a sleep.
///
/// Contract for implementations:
/// - return every HTTP answer, whatever its status (a 401 or a 503 is a response, not an error);
/// - throw only when no answer arrived (offline, timeout, TLS failure, cancelled);
/// - be safe to call concurrently.
public protocol WeatherHTTPTransport: Sendable {
    /// Sends `request` and returns the server's answer.
    func send(_ request: WeatherHTTPRequest) async throws -> WeatherHTTPResponse
}
