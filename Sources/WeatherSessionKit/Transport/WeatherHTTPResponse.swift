import Foundation

/// One HTTP response: status, headers and body, whatever the status.
///
/// Transports return every answer the server gave, including 4xx and 5xx; only a failure to get
/// an answer at all (no network, timeout, TLS) is thrown. Interpreting statuses is the job of
/// ``WeatherSessionService`` and ``WeatherClient``.
public struct WeatherHTTPResponse: Sendable, Equatable {
    /// The HTTP status code.
    public var status: Int
    /// Header fields; look them up with ``header(_:)``.
    public var headers: [String: String]
    /// The body, possibly empty.
    public var body: Data

    /// Creates a response.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of the header `name`, compared case-insensitively as HTTP requires.
    public func header(_ name: String) -> String? {
        headerValue(name, in: headers)
    }

    /// Whether the status is 2xx.
    public var isSuccess: Bool { (200..<300).contains(status) }
}
