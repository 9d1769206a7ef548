/// `GET /openapi.json`: the OpenAPI 3.1 description, compiled into the binary.
struct OpenAPIHandler: Responder {
    func respond(to request: Request, context: inout Context) throws(HTTPError) -> Response {
        .json(200, Array(openAPIDocument.utf8), headers: [("Cache-Control", "public, max-age=3600")])
    }
}
