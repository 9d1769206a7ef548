import WeatherCore

/// `GET /v1/health`: database reachable and migrated. No secrets, counts or configuration.
struct HealthHandler: Responder {
    let store: any GatewayStore

    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
        guard store.isHealthy() else {
            throw HTTPError(status: 503, code: "unhealthy", message: "the database is not reachable or not migrated")
        }
        var w = JSONWriter()
        w.object { w in
            w.field("status", "ok")
            w.field("time", context.now.iso8601)
        }
        return .json(200, w.bytes, headers: [("Cache-Control", "no-store")])
    }
}
