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
        let (route, found) = find(request)
        return (route, found.map { routes[$0].responder })
    }

    /// Answers `request` with its route's responder, called where the router keeps it (taking
    /// `any Responder` out of `resolve`'s `Result` copied it twice on every request, about 800
    /// instructions; callgrind, session 29). `route` becomes the route's name for the log, `-`
    /// when none matched; a 404 or 405 is thrown like any handler's error.
    public func respond(to request: Request, context: inout Context, route: inout String) throws(HTTPError) -> Response {
        let (name, found) = find(request)
        route = name
        switch found {
        case .success(let index): return try routes[index].responder.respond(to: request, context: &context)
        case .failure(let error): throw error
        }
    }

    /// The route's name and the index of its responder, or the 404/405 error.
    private func find(_ request: Request) -> (route: String, found: Result<Int, HTTPError>) {
        if let found = find(path: request.path, method: request.method) { return found }
        for path in request.alternatePaths {
            if let found = find(path: path, method: request.method) { return found }
        }
        return ("-", .failure(.notFound))
    }

    /// The answer for one spelling of the path; nil when no route has that path.
    private func find(path: String, method: String) -> (route: String, found: Result<Int, HTTPError>)? {
        var pathKnown = false
        let length = path.utf8.count
        // By index: `for r in routes` copied every route (two strings and a responder) on every request.
        for i in routes.indices where routes[i].pathLength == length && routes[i].path == path {
            if routes[i].method == method { return (routes[i].path, .success(i)) }
            pathKnown = true
        }
        guard pathKnown else { return nil }
        return (path, .failure(.methodNotAllowed(routes.filter { $0.path == path }.map(\.method))))
    }
}
