import WeatherCore

/// The one central protocol: a request in, a response out.
public protocol Responder {
    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response
}
