/// Everything the gateway can be told, with the defaults of API.md. Built once at start-up.
public struct GatewayConfig: Sendable, Equatable {
    public var databasePath: String
    /// `nil`: generate once into `hashKeyFile` (0600, beside the database).
    public var hashKey: String?
    public var legacyToken: String?
    /// Settings read from the file whose value holds what looks like a trailing comment
    /// (`ConfigLoader.SettingsFile.commented`; the environment's values are not among them).
    public var commentedSettings: [String] = []
    /// Settings the file gives on more than one line (`ConfigLoader.SettingsFile.repeated`;
    /// those the environment sets are not among them).
    public var repeatedSettings: [ConfigLoader.RepeatedSetting] = []
    public var caiyunToken: String?
    public var caiyunBaseURL: String = "https://api.caiyunapp.com"
    public var visualCrossingKey: String?
    public var visualCrossingBaseURL: String = "https://weather.visualcrossing.com"
    /// The providers the gateway has adapters for.
    public static let knownProviders = ["caiyun", "visualcrossing"]
    /// Order of preference; only configured providers are used.
    public var providers: [String] = GatewayConfig.knownProviders

    /// The variable that holds each known provider's key.
    public static let providerKeyVariables = ["caiyun": "CAIYUN_API_TOKEN", "visualcrossing": "VISUAL_CROSSING_API_KEY"]

    /// The providers the workers will call, in order: those of `providers` with a key.
    public var configuredProviders: [String] { providers.filter(hasKey) }

    /// Providers with a key that `providers` leaves out: their key is never used.
    public var keyedProvidersLeftOut: [String] { GatewayConfig.knownProviders.filter { hasKey($0) && !providers.contains($0) } }

    /// The base-URL settings of the configured providers that would send their key in clear
    /// text: plain `http://` to a host other than this machine (a provider-client audit, session
    /// 30: `CAIYUN_BASE_URL=http://api.caiyunapp.com` sent the token unencrypted with every
    /// uncached request). Allowed, for a reverse proxy on a private network, but the workers say
    /// so at start and `weatherctl check` warns.
    public var providerKeysInClearText: [String] {
        let bases = [("caiyun", "CAIYUN_BASE_URL", caiyunBaseURL), ("visualcrossing", "VISUAL_CROSSING_BASE_URL", visualCrossingBaseURL)]
        return bases.compactMap { name, variable, base in
            guard configuredProviders.contains(name), let url = try? HTTPURL.parseBase(base), !url.tls, !Self.isLoopback(url.host) else { return nil }
            return variable
        }
    }

    /// A legacy token shorter than 16 characters: accepted, since app builds already shipped carry
    /// it, but guessable by trying (a wrong token is refused before any quota is taken), so the
    /// workers say so at start and `weatherctl check` warns.
    public var legacyTokenIsShort: Bool { (legacyToken?.utf8.count ?? 16) < 16 }

    /// The settings this configuration changes from the defaults that the shipped privacy notice
    /// (`htdocs/privacy.html`) states as facts: the grid, the tokens' lifetimes, how long weather
    /// is cached and how often the workers' clean-up runs. The notice is untrue until the
    /// operator edits it, which `weatherctl check` says (a privacy audit, session 35).
    public var settingsThePrivacyNoticeStates: [String] {
        let shipped = GatewayConfig(databasePath: databasePath)
        let compared: [(String, Bool)] = [
            ("WEATHER_GRID_DEGREES", gridDegrees != shipped.gridDegrees),
            ("WEATHER_ACCESS_TOKEN_TTL", tokenPolicy.accessTTL != shipped.tokenPolicy.accessTTL),
            ("WEATHER_REFRESH_TOKEN_TTL", tokenPolicy.refreshTTL != shipped.tokenPolicy.refreshTTL),
            ("WEATHER_CACHE_TTL", cacheTTL != shipped.cacheTTL),
            ("WEATHER_CACHE_STALE_TTL", cacheStaleTTL != shipped.cacheStaleTTL),
            ("WEATHER_PRUNE_INTERVAL", pruneInterval != shipped.pruneInterval),
        ]
        return compared.filter(\.1).map(\.0)
    }

    /// `localhost`, 127.0.0.0/8 or `::1`: a host whose traffic never leaves this machine.
    static func isLoopback(_ host: String) -> Bool {
        let h = host.lowercased()
        return h == "localhost" || h.hasSuffix(".localhost") || h == "::1" || (h.hasPrefix("127.") && h.split(separator: ".").count == 4)
    }

    func hasKey(_ provider: String) -> Bool {
        (provider == "caiyun" && caiyunToken != nil) || (provider == "visualcrossing" && visualCrossingKey != nil)
    }
    public var providerTimeout: Double = 4
    /// Longest pause in seconds before a failing provider is called again (`ProviderCooldowns`); 0 = off.
    public var providerCooldown: Int64 = 30
    public var tokenPolicy = TokenPolicy()
    public var cacheTTL: Int64 = 600
    public var cacheStaleTTL: Int64 = 21_600
    public var gridDegrees: Double = 0.05
    public var limits = LimitSettings()
    public var trustedProxies: [CIDR] = []
    /// Prefix before `/v1/...`, e.g. `/api`; empty when mounted at the root.
    public var mountPrefix: String = ""
    public var platforms: [String] = ["ios", "android"]
    /// Requests a worker serves before exiting for its process manager to replace it; 0 = never.
    public var maxRequestsPerWorker: Int = 0
    /// Seconds between flushes of in-memory counters and `last_seen_at` touches.
    public var flushInterval: Int64 = 10
    /// Seconds a worker waits for more of a request body before answering 400: for each piece
    /// under FastCGI, for the whole body under CGI.
    public var bodyTimeout: Int = 10
    /// The workers run the clean-up (`weatherctl prune`'s rules) themselves when none, theirs or
    /// `weatherctl prune`'s, started for this many seconds; 0 = never. 25 hours: the daily prune
    /// timer (a random minute in the hour after midnight) always comes first where it runs, and
    /// a host without it (shared hosting) still gets a clean-up about once a day.
    public var pruneInterval: Int64 = 90_000

    public init(databasePath: String) { self.databasePath = databasePath }

    /// The folder of `databasePath`; empty for a bare file name (the working directory).
    public var databaseFolder: String {
        databasePath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
    }

    /// The key file generated when `WEATHER_HASH_KEY` is unset: beside the database.
    public var hashKeyFile: String { (databaseFolder.isEmpty ? "." : databaseFolder) + "/hash.key" }

    /// Default database location, outside any document root.
    public static let defaultDatabasePath = "/var/lib/closet-weather/weather.sqlite3"
    /// Default configuration file, read when `WEATHER_CONFIG` is unset and the file exists.
    public static let defaultConfigPath = "/etc/closet-weather/weather.conf"
}

/// Token lifetimes in seconds (API.md defaults: 12 h, 6 h, 30 d, 30 s).
public struct TokenPolicy: Sendable, Equatable {
    public var accessTTL: Int64 = 43_200
    public var refreshAfter: Int64 = 21_600
    public var refreshTTL: Int64 = 2_592_000
    public var refreshRetryWindow: Int64 = 30

    public init() {}
}

/// The six quotas of API.md; 0 turns one off.
public struct LimitSettings: Sendable, Equatable {
    public var sessionCreatePerIPPerHour = 30
    public var refreshPerSessionPerHour = 60
    public var requestsPerSessionPerHour = 120
    public var requestsPerIPPerHour = 1200
    public var gridCellsPerSessionPerDay = 30
    public var legacyRequestsPerIPPerHour = 120
    /// Window lengths, seconds. Only tests and rehearsals change them.
    public var hourWindow: Int64 = 3600
    public var dayWindow: Int64 = 86_400

    /// Whether any quota counted in rate buckets is on (the grid cells' is counted apart).
    public var anyRateBucket: Bool {
        [sessionCreatePerIPPerHour, refreshPerSessionPerHour, requestsPerSessionPerHour, requestsPerIPPerHour, legacyRequestsPerIPPerHour]
            .contains { $0 > 0 }
    }

    public init() {}
}
