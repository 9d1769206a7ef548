import Foundation

/// One HTTP request as the weather gateway sees it: method, absolute URL, headers and body.
///
/// A plain value so that a fake ``WeatherHTTPTransport`` can inspect exactly what would go on
/// the wire (which header carries the token, what the JSON body holds).
public struct WeatherHTTPRequest: Sendable, Equatable {
    /// The HTTP method, upper case: `GET` or `POST`.
    public var method: String
    /// The absolute URL, including the base URL's mount prefix and the query.
    public var url: URL
    /// Header fields. Names are written in their canonical spelling; compare them
    /// case-insensitively with ``header(_:)``.
    public var headers: [String: String]
    /// The body, or `nil` for requests without one.
    public var body: Data?

    /// Creates a request.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// The value of the header `name`, compared case-insensitively as HTTP requires.
    public func header(_ name: String) -> String? {
        headerValue(name, in: headers)
    }
}

extension WeatherHTTPRequest: CustomStringConvertible, CustomReflectable {
    /// For a logging transport: method, path and header names, never a header value (the session
    /// token travels in one), the query (coordinates) or the body (tokens, the installation id).
    public var description: String {
        "\(method) \(url.path) headers: [\(headers.keys.sorted().joined(separator: ", "))] body: \(body?.count ?? 0) bytes"
    }

    /// Redacted the same way, for `dump` and debuggers.
    public var customMirror: Mirror {
        Mirror(
            self,
            children: [
                "method": method, "path": url.path, "headerNames": headers.keys.sorted(), "bodyBytes": body?.count ?? 0,
            ], displayStyle: .struct)
    }
}

/// Looks a header up case-insensitively; one function for requests and responses.
func headerValue(_ name: String, in headers: [String: String]) -> String? {
    if let exact = headers[name] { return exact }
    let lowered = name.lowercased()
    return headers.first { $0.key.lowercased() == lowered }?.value
}
