import FastCGIRuntime
import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

// Wiring only: configuration, storage, providers, then the FastCGI (or CGI) loop.

let usage = """
    usage: weather-fcgi [--listen PATH|HOST:PORT]

    Without --listen it serves the FastCGI socket inherited on fd 0 (spawn-fcgi, mod_fcgid,
    systemd), or, when fd 0 is not a socket, answers the one CGI request in its environment.
    Configuration: environment variables, then the file named by WEATHER_CONFIG (see README).
    """

var listenAddress: String?
var args = CommandLine.arguments.dropFirst()
while let arg = args.popFirst() {
    switch arg {
    case "--listen":
        guard let v = args.popFirst() else { StandardErrorLog().write("weather-fcgi: --listen needs an address"); exit(64) }
        listenAddress = v
    case "--help", "-h":
        print(usage)
        exit(0)
    default:
        StandardErrorLog().write("weather-fcgi: unknown argument \(arg)\n\(usage)")
        exit(64)
    }
}

let log = StandardErrorLog()
let gateway: Gateway
do {
    let config = try Bootstrap.loadConfig()
    let store = try Bootstrap.openStore(config)
    let key = try Bootstrap.hashKey(for: config)
    gateway = Gateway(
        config: config, store: store, hashKey: key, clock: SystemClock(), log: log,
        weather: ProviderWiring.source(for: config), requestIdPrefix: "w\(getpid())")
} catch {
    log.write("weather-fcgi: \(error)")
    if listenAddress == nil && FastCGIServer.isCGI {
        // A CGI caller still gets a JSON answer rather than an empty 500.
        let body = "{\"error\":{\"code\":\"service_unavailable\",\"message\":\"the service is not configured correctly\"}}"
        print("Status: 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n\r\n\(body)", terminator: "")
    }
    exit(78)  // EX_CONFIG
}

if let listenAddress {
    do {
        let fd = try FastCGIServer.listen(listenAddress)
        try FastCGIServer.serve(listenFD: fd, maxRequests: gateway.config.maxRequestsPerWorker, handler: gateway.handle, after: { gateway.afterResponse() })
    } catch {
        log.write("weather-fcgi: \(error)")
        exit(71)
    }
} else if FastCGIServer.isCGI {
    FastCGIServer.serveCGI(handler: gateway.handle)
} else {
    do {
        try FastCGIServer.serve(maxRequests: gateway.config.maxRequestsPerWorker, handler: gateway.handle, after: { gateway.afterResponse() })
    } catch {
        log.write("weather-fcgi: \(error)")
        exit(71)
    }
}
gateway.afterResponse(force: true)
