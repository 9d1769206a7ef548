import WeatherCore

/// The one central protocol: a request in, a response out.
public protocol Responder {
    /// The response to `request`; what the request learned (session, cache state, providers)
    /// goes into `context`. An `HTTPError` thrown is the answer.
    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response
}
