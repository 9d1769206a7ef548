import WeatherCore

/// What a request learned along the way; travels beside the request, never in globals.
public struct Context: Sendable {
    public var requestId: String
    /// The client as per-IP quotas count it: its address, or for IPv6 its /64 (`ClientAddress.quotaKey`).
    public var clientIP: String
    public var now: Timestamp
    /// Set by authentication.
    public var authMode: AuthMode?
    public var sessionId: String?
    /// For the log line: `hit`, `miss`, `stale`.
    public var cache: String?
    /// For the log line, when providers were asked: `WeatherFetch.trail`, each fetch's in turn.
    public var providers: String?

    /// Adds a fetch's trail to the log line's: a request that fetched twice (the outlook, then
    /// the days it could not hold) named only its second fetch (a race hunt).
    public mutating func addProviders(_ trail: String?) {
        guard let trail else { return }
        providers = providers.map { "\($0),\(trail)" } ?? trail
    }

    public init(requestId: String, clientIP: String, now: Timestamp) {
        self.requestId = requestId
        self.clientIP = clientIP
        self.now = now
    }
}

/// How a weather request proved itself (API.md "Authentication").
public enum AuthMode: String, Sendable {
    case weatherSession = "weather_session"
    case weatherToken = "weather_token"
}

/// The one central protocol: a request in, a response out.
public protocol Responder {
    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response
}

/// Maps method + path to a responder; knows 404 and 405 with `Allow`.
public struct Router {
    struct Route {
        let method: String
        let path: String
        let responder: any Responder
    }

    private var routes: [Route] = []

    public init() {}

    public mutating func add(_ method: String, _ path: String, _ responder: some Responder) {
        routes.append(Route(method: method, path: path, responder: responder))
    }

    /// The route name for logs (the matched path, or `-`), and the responder or the 404/405 error.
    public func resolve(_ request: Request) -> (route: String, result: Result<any Responder, HTTPError>) {
        if let found = resolve(path: request.path, method: request.method) { return found }
        for path in request.alternatePaths {
            if let found = resolve(path: path, method: request.method) { return found }
        }
        return ("-", .failure(.notFound))
    }

    /// The answer for one spelling of the path; nil when no route has that path.
    private func resolve(path: String, method: String) -> (route: String, result: Result<any Responder, HTTPError>)? {
        var pathKnown = false
        for r in routes where r.path == path {
            if r.method == method { return (r.path, .success(r.responder)) }
            pathKnown = true
        }
        guard pathKnown else { return nil }
        return (path, .failure(.methodNotAllowed(routes.filter { $0.path == path }.map(\.method))))
    }
}
