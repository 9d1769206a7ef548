import WeatherCore

/// Maps method + path to a responder; knows 404 and 405 with `Allow`.
public struct Router {
    struct Route {
        let method: String
        let path: String
        /// The path's byte count: most routes are passed over without comparing strings.
        let pathLength: Int
        let responder: any Responder
    }

    private var routes: [Route] = []

    public init() {}

    /// Routes `method` on the exact `path` to `responder`.
    public mutating func add(_ method: String, _ path: String, _ responder: some Responder) {
        routes.append(Route(method: method, path: path, pathLength: path.utf8.count, responder: responder))
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
        let length = path.utf8.count
        // By index: `for r in routes` copied every route (two strings and a responder) on every request.
        for i in routes.indices where routes[i].pathLength == length && routes[i].path == path {
            if routes[i].method == method { return (routes[i].path, .success(routes[i].responder)) }
            pathKnown = true
        }
        guard pathKnown else { return nil }
        return (path, .failure(.methodNotAllowed(routes.filter { $0.path == path }.map(\.method))))
    }
}
