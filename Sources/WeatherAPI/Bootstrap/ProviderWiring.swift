import WeatherCore
import WeatherProviders

/// Builds the weather source from configuration: the configured providers, in the order of
/// `WEATHER_PROVIDERS`, skipping any without a key. `pauses` is where the workers share the
/// pauses of failing providers (`GatewayStore.providerPauses`); nil keeps them per worker.
public enum ProviderWiring {
    /// The provider chain `config` describes, sharing pauses through `pauses`.
    public static func source(for config: GatewayConfig, pauses: (any ProviderPauseBoard)? = nil) throws -> any WeatherSource {
        // The outlook and `days=15` are one URL: a provider whose day has not turned answers the
        // first a day short, and the second, asked at once, gets that answer again.
        let transport = RepeatedCallTransport(HTTP1Transport(), freshSeconds: config.cacheTTL)
        var providers: [any WeatherProvider] = []
        for name in config.providers {
            switch name {
            case "caiyun":
                if let token = config.caiyunToken {
                    providers.append(CaiyunProvider(baseURL: config.caiyunBaseURL, token: token, transport: transport, timeoutSeconds: config.providerTimeout))
                }
            case "visualcrossing":
                if let key = config.visualCrossingKey {
                    providers.append(
                        VisualCrossingProvider(baseURL: config.visualCrossingBaseURL, apiKey: key, transport: transport, timeoutSeconds: config.providerTimeout)
                    )
                }
            default:
                break  // refused by the config loader already
            }
        }
        return ChainWeatherSource(chain: ProviderChain(providers), timeout: config.providerTimeout, cooldown: config.providerCooldown, pauses: pauses)
    }
}

/// The provider chain seen as a `WeatherSource`, with the pauses of failing providers.
final class ChainWeatherSource: WeatherSource {
    let chain: ProviderChain
    let timeout: Double
    private var cooldowns: ProviderCooldowns
    /// The pauses' clock: read when a fetch ends (a pause starts then) and to ask whether one runs.
    var clock: any Clock

    init(chain: ProviderChain, timeout: Double, cooldown: Int64, pauses: (any ProviderPauseBoard)? = nil, clock: any Clock = SystemClock()) {
        self.chain = chain
        self.timeout = timeout
        // A worker testing a provider after its pause holds it for the others for as long as its
        // fetch may take (its failures are recorded when the fetch ends), and a second.
        self.cooldowns = ProviderCooldowns(
            longest: cooldown, board: pauses,
            probeSeconds: Int64((timeout * Double(max(1, chain.providers.count))).rounded(.up)) + 1)
        self.clock = clock
    }

    var isConfigured: Bool { !chain.isEmpty }
    var worstCaseSeconds: Double { timeout * Double(max(1, chain.providers.count)) }

    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> WeatherFetch {
        Self.weatherFetch(chain.fetch(query, at: point, now: now, cooldowns: &cooldowns, clock: clock, within: seconds))
    }

    func uncoveredFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch? {
        guard !chain.providers.contains(where: { $0.canCover(query, now: now) }) else { return nil }
        return WeatherFetch(
            result: .failure(.notCovered), attempts: [],
            trail: chain.providers.map { "\($0.name):\(ProviderFailure.notCovered.code)" }.joined(separator: ","))
    }

    func pausedFetch(_ query: WeatherQuery, now: Timestamp) -> WeatherFetch? {
        // The pauses were recorded on `clock`; the request's `now` may be some seconds older.
        chain.pausedOutcome(query, now: clock.now(), cooldowns: cooldowns).map(Self.weatherFetch)
    }

    /// The chain's outcome in the handler's terms: calls for the counters, the log trail.
    static func weatherFetch(_ outcome: ChainOutcome) -> WeatherFetch {
        let attempts = outcome.attempts.filter(\.sentRequest).map { (provider: $0.provider, failed: $0.calledAndFailed) }
        let trail = outcome.attempts.map { "\($0.provider):\($0.code)" }.joined(separator: ",")
        switch outcome.result {
        case .success(let report): return WeatherFetch(result: .success(report), attempts: attempts, trail: trail)
        case .failure(.timeout): return WeatherFetch(result: .failure(.timeout), attempts: attempts, retryAfter: outcome.retryAfter, trail: trail)
        case .failure(.notCovered): return WeatherFetch(result: .failure(.notCovered), attempts: attempts, trail: trail)
        case .failure: return WeatherFetch(result: .failure(.providerError), attempts: attempts, retryAfter: outcome.retryAfter, trail: trail)
        }
    }
}
