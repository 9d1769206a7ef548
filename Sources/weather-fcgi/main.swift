import FastCGIRuntime
import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

// Wiring only: configuration, storage, providers, then the FastCGI (or CGI) loop.

let usage = """
    usage: weather-fcgi [--listen PATH|HOST:PORT|PORT [--socket-mode 0660]] [--workers N]
           weather-fcgi --version

    --listen PORT (or :PORT) listens on 127.0.0.1; 0.0.0.0:PORT on every interface (IPv4 only:
    a HOST is an IPv4 address or a name of one). A PATH is
    taken over only from a dead socket: a live one or any other file there stops the start.

    Without --listen it serves the FastCGI socket inherited on fd 0 (spawn-fcgi, mod_fcgid,
    systemd), or, when fd 0 is not a socket, answers the one CGI request in its environment.
    --workers N (2 to 256) keeps N worker processes on that socket and restarts any that die;
    1, the default, serves in this one process.
    Configuration: environment variables, then the file named by WEATHER_CONFIG (see README).
    --version prints the release this program is (`make dist` sets it; "dev" otherwise).
    """

FastCGIServer.installSignalHandlers()
Bootstrap.restrictFileCreation()
Bootstrap.forbidCoreDumps()

var listenAddress: String?
var workers = 1
var socketMode: mode_t = 0o660
var socketModeGiven = false
// Started by a web server as CGI, the arguments are not the operator's: Apache turns a query
// string without `=` into arguments (`/weather.fcgi?--listen+0.0.0.0:9000+--workers+256` would
// have started a FastCGI server for anyone to talk to directly, with a REMOTE_ADDR of their
// choosing). A CGI request is answered from its environment only.
var args = getenv("GATEWAY_INTERFACE") == nil ? CommandLine.arguments.dropFirst() : []
while let arg = args.popFirst() {
    switch arg {
    case "--listen":
        guard let v = args.popFirst() else { StandardErrorLog().write("weather-fcgi: --listen needs an address"); exit(64) }
        listenAddress = v
    case "--workers":
        guard let v = args.popFirst(), let n = Int(v), (1...256).contains(n) else {
            StandardErrorLog().write("weather-fcgi: --workers needs a number 1...256")
            exit(64)
        }
        workers = n
    case "--socket-mode":
        guard let v = args.popFirst(), let m = mode_t(v, radix: 8), m <= 0o777 else {
            StandardErrorLog().write("weather-fcgi: --socket-mode needs an octal mode such as 0660")
            exit(64)
        }
        socketMode = m
        socketModeGiven = true
    case "--help", "-h":
        print(usage)
        exit(0)
    case "--version":
        print("weather-fcgi \(BuildInfo.version)")
        exit(0)
    default:
        // Named only when it looks like an option: a mistyped `--caiyun-token=…` is not logged.
        let option = arg.hasPrefix("-") && arg.utf8.count <= 32 && !arg.contains("=")
        StandardErrorLog().write("weather-fcgi: unknown argument \(option ? arg : "of \(arg.count) characters (not shown)")\n\(usage)")
        exit(64)
    }
}

if socketModeGiven && !(listenAddress?.hasPrefix("/") ?? false) {
    // It would have been ignored: the socket is inherited, or a TCP port.
    StandardErrorLog().write("weather-fcgi: --socket-mode applies to --listen PATH only (a Unix socket this program makes)")
    exit(64)
}

/// Everything a worker needs, opened in the process that uses it (SQLite connections must not
/// cross a fork). `announce`: say what an operator should know about the database (once per
/// start: the supervisor's check says it, its workers, restarted or recycled, do not).
func makeGateway(announce: Bool = true) throws -> Gateway {
    let (config, _, besideProgram, _) = try Bootstrap.loadConfigAndSource()
    if let besideProgram {
        Bootstrap.denyWebAccess(toFoldersOf: [besideProgram, config.databasePath])
    }
    let store = try Bootstrap.openStore(config)
    if announce, !config.commentedSettings.isEmpty {
        StandardErrorLog().write("weather-fcgi: \(Bootstrap.commentedSettingsNotice(config.commentedSettings))")
    }
    if announce, !config.repeatedSettings.isEmpty {
        StandardErrorLog().write("weather-fcgi: \(Bootstrap.repeatedSettingsNotice(config.repeatedSettings))")
    }
    if announce {
        for variable in config.providerKeysInClearText { StandardErrorLog().write("weather-fcgi: warning: \(Bootstrap.clearTextKeyNotice(variable))") }
        if config.legacyTokenIsShort { StandardErrorLog().write("weather-fcgi: warning: \(Bootstrap.shortLegacyTokenNotice)") }
    }
    if announce, !store.appliedMigrations.isEmpty {
        StandardErrorLog().write(
            "weather-fcgi: applied \(store.appliedMigrations.count) migration(s) to the database: \(store.appliedMigrations.joined(separator: ", "))")
    }
    // A build rolled back under a newer release's migrations still serves (they only ever add
    // tables and columns), but says so: `weatherctl migrate` refuses that database, check fails.
    if announce, let unknown = try? store.unknownMigrations(), !unknown.isEmpty {
        StandardErrorLog().write(
            "weather-fcgi: the database has \(unknown.count) migration(s) this build does not know (\(unknown.joined(separator: ", "))): a newer release applied them; serving anyway, run that release"
        )
    }
    // Each take of a quota is then a write transaction, for this worker's life (a stopped holder
    // of the table's lock is another matter: takes go to the database while it lasts, which
    // `weatherctl stats` counts).
    if announce, config.limits.anyRateBucket, let why = store.rateTableUnavailable {
        StandardErrorLog().write("weather-fcgi: warning: rate buckets are counted \(RateBuckets.database(why: why).summary)")
    }
    // A store that cannot say counts as holding sessions: no new key then.
    let key = try Bootstrap.hashKey(
        for: config, sessionsStored: { (try? store.holdsAnySession()) ?? true },
        created: {
            StandardErrorLog().write("weather-fcgi: created the hash key file beside the database (a new database: keep it with the database's backups)")
        })
    if let notice = Bootstrap.hashKeyNotice(try Bootstrap.verifyHashKey(key, store: store, now: SystemClock().now())) {
        StandardErrorLog().write("weather-fcgi: \(notice)")
    }
    return Gateway(
        config: config, store: store, hashKey: key, clock: SystemClock(), log: StandardErrorLog(),
        weather: try ProviderWiring.source(for: config, pauses: store.providerPauses), requestIdPrefix: "w\(getpid())")
}

/// Serves until SIGTERM or recycling; returns the exit status. With `retireWhenReplaced` it also
/// ends, at a quiet moment, once its program file has been replaced (see the caller).
func serve(listenFD: Int32, retireWhenReplaced: Bool = false, announce: Bool = true) -> Int32 {
    let gateway: Gateway
    do { gateway = try makeGateway(announce: announce) } catch {
        StandardErrorLog().write("weather-fcgi: \(error)")
        return 78  // EX_CONFIG
    }
    // Once per start, so an upgrade's log says which release now serves: a worker of the
    // supervisor's does not repeat it (its line is the supervisor's, below).
    if announce { StandardErrorLog().write("weather-fcgi: version \(BuildInfo.version), serving (pid \(getpid()))") }
    FastCGIServer.useOneMallocArena()
    var served = 0
    do {
        // A quiet worker still writes its counters and session touches, and gives back ended
        // limit leases, within about one flush interval (without it they waited for its next request).
        try FastCGIServer.serve(
            listenFD: listenFD, maxRequests: gateway.config.maxRequestsPerWorker,
            parameterNames: Request.parameterNames, idleSeconds: Int(gateway.config.flushInterval),
            bodySeconds: gateway.config.bodyTimeout, log: StandardErrorLog(), handler: gateway.handle,
            idle: {
                if gateway.afterResponse() { FastCGIServer.trimHeap() }
                if retireWhenReplaced && FastCGIServer.programReplaced() {
                    StandardErrorLog().write("weather-fcgi: worker \(getpid()) retires: its program file was replaced (mod_fcgid runs the new one)")
                    FastCGIServer.requestStop()
                }
            },
            after: {
                let cleanedUp = gateway.afterResponse()
                served &+= 1
                if served % 4096 == 0 || cleanedUp { FastCGIServer.trimHeap() }
            })
    } catch {
        StandardErrorLog().write("weather-fcgi: \(error)")
        return 71
    }
    gateway.afterResponse(force: true)
    gateway.stop()
    return 0
}

if listenAddress == nil && FastCGIServer.isCGI {
    do {
        let gateway = try makeGateway()
        FastCGIServer.serveCGI(bodySeconds: gateway.config.bodyTimeout, handler: gateway.handle)
        gateway.afterResponse(force: true)
    } catch {
        // A CGI caller still gets the JSON envelope rather than an empty 500.
        FastCGIServer.serveCGI { params, _ in
            let answer = Gateway.notStarted(params: params)
            StandardErrorLog().write("weather-fcgi: request_id=\(answer.requestId) \(error)")
            return answer.response
        }
        exit(78)
    }
    exit(0)
}

if let shortOfFiles = FastCGIServer.ensureDescriptors() {
    StandardErrorLog().write("weather-fcgi: \(shortOfFiles)")
    exit(71)
}
var listenFD: Int32 = 0
if let listenAddress {
    do { listenFD = try FastCGIServer.listen(listenAddress, mode: socketMode) } catch {
        StandardErrorLog().write("weather-fcgi: \(error)")
        exit(71)
    }
}
/// A socket file this process bound and will never serve (start-up failed) is removed, so it
/// does not stay behind looking like a service that refuses connections.
@MainActor func exitBeforeServing(_ status: Int32) -> Never {
    if let listenAddress, listenAddress.hasPrefix("/") { FastCGIServer.removeBoundSocket(listenAddress) }
    exit(status)
}

if FastCGIServer.stopRequested { exit(0) }
if workers > 1 {
    // Fail fast in the parent (configuration, database, migrations), then let each child open its own.
    do { _ = try makeGateway() } catch {
        StandardErrorLog().write("weather-fcgi: \(error)")
        exitBeforeServing(78)
    }
    StandardErrorLog().write("weather-fcgi: version \(BuildInfo.version), starting \(workers) workers (supervisor pid \(getpid()))")
    // No worker serves the socket yet: an idle interval left on it by the previous start (a
    // systemd socket outlives the service) gives way to this start's setting.
    FastCGIServer.clearIdleInterval(listenFD)
    Supervisor.run(
        workers: workers, log: StandardErrorLog(),
        givingUp: {
            if let listenAddress, listenAddress.hasPrefix("/") { FastCGIServer.removeBoundSocket(listenAddress) }
        }
    ) { serve(listenFD: listenFD, announce: false) }
}
// Under mod_fcgid a worker whose program was upgraded (a new file renamed over it) retires at
// its next quiet moment: Apache starts the new file for new requests but would keep the old
// processes, each with its memory and database connection, until it restarts. Only there: under
// our supervisor or spawn-fcgi nothing would start the new program in its place.
let status = serve(listenFD: listenFD, retireWhenReplaced: listenAddress == nil && FastCGIServer.startedByApache())
if status == 78 { exitBeforeServing(status) }
exit(status)
