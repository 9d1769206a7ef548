import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
import WeatherProviders
import WeatherStore

/// A clock the test moves by hand.
final class ManualClock: Clock, @unchecked Sendable {
    var current: Timestamp
    init(_ iso: String = "2026-11-30T02:00:00Z") { current = Timestamp(iso8601: iso)! }
    func now() -> Timestamp { current }
    func advance(_ seconds: Int64) { current = current.adding(seconds: seconds) }
    /// Now as the limiter counts it.
    var nowMs: Int64 { current.seconds * 1000 }
}

/// A scripted weather source that counts its calls.
final class FakeWeatherSource: WeatherSource {
    var calls = 0
    var failure: WeatherFetch.Failure?
    var isConfigured = true
    var worstCaseSeconds = 1.0

    /// The query of the latest call.
    var lastQuery: WeatherQuery?
    /// Days in an outlook's answer (providers send 15).
    var outlookDays = 15
    /// False as for a trip further ahead than any provider is asked for (`uncoveredFetch`; an
    /// outlook or a forecast is always covered).
    var covering = true
    /// The place's offset to UTC in seconds, as a provider sends it: when set, days start at the
    /// place's date and reports say when its today ends. Nil: UTC dates, no end.
    var utcOffset: Int64?
    /// Reports say the provider's day has not turned yet (`WeatherReport.dayNotTurned`).
    var dayNotTurned = false
    /// The time each call was given (`within`), in order.
    var given: [Double] = []
    /// Runs at the start of every call, with its query (a slow provider advances the clock).
    var onFetch: ((WeatherQuery) -> Void)?

    func uncoveredFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch? {
        guard !covering, case .trip = query else { return nil }
        return WeatherFetch(result: .failure(.notCovered), attempts: [], trail: "caiyun:not_covered")
    }

    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> WeatherFetch {
        given.append(seconds)
        // As the chain does: given too little time, no call.
        if seconds < ProviderChain.shortestCall { return WeatherFetch(result: .failure(.timeout), attempts: [], trail: "caiyun:out_of_time") }
        calls += 1
        lastQuery = query
        onFetch?(query)
        if let failure { return WeatherFetch(result: .failure(failure), attempts: [("caiyun", true)]) }
        let local = now.adding(seconds: utcOffset ?? 0)
        let days = Self.days(for: query, now: local, outlookDays: outlookDays)
        let todayEndsAt = utcOffset.map { _ in now.seconds + 86_400 - ((local.seconds % 86_400) + 86_400) % 86_400 }
        let current: CurrentWeather? =
            if query.includesCurrent {
                CurrentWeather(
                    observedAt: now.iso8601, temperatureC: 12.5, apparentTemperatureC: nil, humidity: 0.5, windSpeedKph: 3, precipitationMmPerHour: 0,
                    condition: .cloudy)
            } else { nil }
        var report = WeatherReport(
            provider: "caiyun", location: point, timezone: "Asia/Shanghai", current: current, daily: days, fetchedAt: now.iso8601, todayEndsAt: todayEndsAt)
        report.dayNotTurned = dayNotTurned
        report.firstDayEndsAt = todayEndsAt
        return WeatherFetch(result: .success(report), attempts: [("caiyun", false)], trail: "caiyun:ok")
    }
}

extension FakeWeatherSource {
    /// The days a provider answers `query` with: `outlookDays` from today for an outlook (real
    /// providers send 15), the days asked for a forecast, a trip's own days.
    static func days(for query: WeatherQuery, now: Timestamp, outlookDays: Int = 15) -> [DailyWeather] {
        let dates: [LocalDate] =
            switch query {
            case .outlook: (0..<outlookDays).map { now.utcDate.adding(days: $0) }
            case .forecast(let days): (0..<days).map { now.utcDate.adding(days: $0) }
            case .trip(let start, let end): Array(sequence(first: start) { $0 < end ? $0.adding(days: 1) : nil })
            }
        return dates.map {
            DailyWeather(date: $0.description, temperatureMinC: 1, temperatureMaxC: nil, condition: .clear, precipitationProbability: 0.1)
        }
    }
}

/// An in-process gateway on a real SQLite file with an injected clock.
final class TestGateway {
    let directory: URL
    let clock: ManualClock
    let store: SQLiteGatewayStore
    let gateway: Gateway
    let log = MemoryLog()
    let source = FakeWeatherSource()
    let config: GatewayConfig
    /// False for a second worker: the first one owns (and deletes) the directory.
    private let ownsDirectory: Bool
    static let hashKey = Array("0123456789abcdef0123456789abcdef".utf8)

    /// Another worker process on the same database, configuration and clock (its own connection,
    /// limiter and caches), as `--workers 2` would run it.
    /// `weatherOn`: the weather routes' source, made for this worker's store, instead of `source`.
    init(workerBeside first: TestGateway, weatherOn: ((SQLiteGatewayStore) -> any WeatherSource)? = nil) throws {
        directory = first.directory
        clock = first.clock
        config = first.config
        ownsDirectory = false
        store = try SQLiteGatewayStore(path: config.databasePath)
        gateway = Gateway(
            config: config, store: store, hashKey: Self.hashKey, clock: clock, log: log, weather: weatherOn?(store) ?? source, requestIdPrefix: "t2")
    }

    /// `weather`: the weather routes' source instead of `source` (the fake); `weatherOn`: one
    /// made for this worker's store.
    init(
        weather: (any WeatherSource)? = nil, configure: (inout GatewayConfig) -> Void = { _ in },
        weatherOn: ((SQLiteGatewayStore) -> any WeatherSource)? = nil
    ) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("cw-api-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var config = GatewayConfig(databasePath: directory.appendingPathComponent("w.sqlite3").path)
        config.legacyToken = "legacy-token-0123456789"
        config.flushInterval = 0
        config.pruneInterval = 0  // `CleanUpTests` turn the workers' clean-up on
        configure(&config)
        self.config = config
        clock = ManualClock()
        ownsDirectory = true
        store = try SQLiteGatewayStore(path: config.databasePath)
        gateway = Gateway(
            config: config, store: store, hashKey: Self.hashKey, clock: clock, log: log, weather: weather ?? weatherOn?(store) ?? source, requestIdPrefix: "t")
    }

    deinit { if ownsDirectory { try? FileManager.default.removeItem(at: directory) } }

    struct Answer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
    }

    func send(
        _ method: String, _ uri: String, headers: [String: String] = [:], body: Any? = nil, ip: String = "198.51.100.7",
        contentType: String = "application/json"
    ) -> Answer {
        var params = ["REQUEST_METHOD": method, "REQUEST_URI": uri, "REMOTE_ADDR": ip]
        var bytes: [UInt8] = []
        if let body {
            bytes = body as? [UInt8] ?? Array(try! JSONSerialization.data(withJSONObject: body))
            params["CONTENT_LENGTH"] = "\(bytes.count)"
            params["CONTENT_TYPE"] = contentType
        }
        for (k, v) in headers { params["HTTP_" + k.uppercased().replacingOccurrences(of: "-", with: "_")] = v }
        let r = gateway.handle(params: CGIParameters(params)) { n in Array(bytes.prefix(n)) }
        gateway.afterResponse()
        return Answer(status: r.status, headers: Dictionary(r.headers.map { ($0.name.lowercased(), $0.value) }, uniquingKeysWith: { $1 }), body: r.body)
    }

    /// Holds SQLite's write lock from another worker's connection for `seconds`, as a `sqlite3`
    /// shell's `BEGIN` on the live file would; returns once the lock is held.
    func holdWriteLockElsewhere(for seconds: Double) throws {
        nonisolated(unsafe) let other = try TestGateway(workerBeside: self)
        try other.store.db.execute("BEGIN IMMEDIATE")
        Thread {
            usleep(UInt32(seconds * 1_000_000))
            try? other.store.db.execute("COMMIT")
        }.start()
    }

    func createSession(installationId: String = UUID().uuidString, ip: String = "198.51.100.7") -> [String: Any] {
        let a = send("POST", "/v1/weather/session", body: ["platform": "ios", "appVersion": "1.0", "installationId": installationId], ip: ip)
        precondition(a.status == 201, "create failed: \(a.status) \(String(decoding: a.body, as: UTF8.self))")
        return a.json
    }

    func refresh(_ s: [String: Any], token: String? = nil) -> Answer {
        send("POST", "/v1/weather/session/refresh", body: ["anonymousSessionId": s["anonymousSessionId"]!, "refreshToken": token ?? s["refreshToken"]!])
    }

    func weather(token: String?, legacy: String? = nil, query: String = "lat=31.2304&lon=121.4737", path: String = "/v1/weather", ip: String = "198.51.100.7")
        -> Answer
    {
        var h: [String: String] = [:]
        if let token { h["X-Weather-Session-Token"] = token }
        if let legacy { h["X-Weather-Token"] = legacy }
        return send("GET", "\(path)?\(query)", headers: h, ip: ip)
    }
}
