import Foundation

/// The body of a 200 from `GET /v1/weather` and `GET /v1/weather/trip`.
///
/// Values a provider did not supply arrive as `null` and decode as `nil`; the gateway never
/// invents them, and neither should the app (show "–", not 0 °C). Fractions (`humidity`,
/// `precipitationProbability`) are 0...1, not percent.
///
/// ```swift
/// let report = try await client.weather(lat: 31.2304, lon: 121.4737, days: 3)
/// if let now = report.current?.temperatureC { print("\(now) °C") }
/// for day in report.daily { print(day.date, day.temperatureMaxC ?? .nan) }
/// ```
public struct WeatherResponse: Sendable, Equatable, Codable {
    /// How the request was authenticated: ``AuthMode/weatherSession`` for this kit.
    public var authMode: AuthMode
    /// The provider that answered, for example `caiyun` or `visualcrossing`.
    public var provider: String
    /// The snapped grid point the forecast is for (not the raw coordinates sent).
    public var location: Location
    /// The IANA time zone of that point, for example `Asia/Shanghai`.
    public var timezone: String
    /// Current conditions; present for `/v1/weather`, `nil` for `/trip`.
    public var current: CurrentConditions?
    /// One entry per day asked for, in order, from the place's today for `/v1/weather`, also in
    /// a ``CacheStatus/stale`` copy served after the place's midnight.
    public var daily: [DailyForecast]
    /// When the gateway (or its cache) fetched the data from the provider.
    public var fetchedAt: Date
    /// Whether the answer came from the gateway's cache.
    public var cache: CacheStatus

    /// Creates a response value (for tests and previews).
    public init(
        authMode: AuthMode, provider: String, location: Location, timezone: String,
        current: CurrentConditions?, daily: [DailyForecast], fetchedAt: Date, cache: CacheStatus
    ) {
        self.authMode = authMode
        self.provider = provider
        self.location = location
        self.timezone = timezone
        self.current = current
        self.daily = daily
        self.fetchedAt = fetchedAt
        self.cache = cache
    }

    /// A point on the gateway's grid (about 5 km): the location is snapped before anything else.
    public struct Location: Sendable, Equatable, Codable {
        /// Latitude in degrees.
        public var lat: Double
        /// Longitude in degrees.
        public var lon: Double

        /// Creates a location.
        public init(lat: Double, lon: Double) {
            self.lat = lat
            self.lon = lon
        }
    }

    /// The conditions now; each measurement is `nil` when the provider lacks it.
    public struct CurrentConditions: Sendable, Equatable, Codable {
        /// When the provider observed these values; `nil` when it did not say.
        public var observedAt: Date?
        /// Air temperature, °C.
        public var temperatureC: Double?
        /// Feels-like temperature, °C.
        public var apparentTemperatureC: Double?
        /// Relative humidity as a fraction, 0...1.
        public var humidity: Double?
        /// Wind speed, km/h.
        public var windSpeedKph: Double?
        /// Precipitation intensity, mm/h.
        public var precipitationMmPerHour: Double?
        /// The sky condition.
        public var condition: WeatherCondition

        /// Creates current conditions.
        public init(
            observedAt: Date?, temperatureC: Double?, apparentTemperatureC: Double?,
            humidity: Double?, windSpeedKph: Double?, precipitationMmPerHour: Double?,
            condition: WeatherCondition
        ) {
            self.observedAt = observedAt
            self.temperatureC = temperatureC
            self.apparentTemperatureC = apparentTemperatureC
            self.humidity = humidity
            self.windSpeedKph = windSpeedKph
            self.precipitationMmPerHour = precipitationMmPerHour
            self.condition = condition
        }
    }

    /// The forecast for one day at the location; each measurement is `nil` when unknown.
    public struct DailyForecast: Sendable, Equatable, Codable {
        /// The day, in the location's time zone.
        public var date: CalendarDate
        /// Lowest temperature, °C.
        public var temperatureMinC: Double?
        /// Highest temperature, °C.
        public var temperatureMaxC: Double?
        /// The day's dominant condition.
        public var condition: WeatherCondition
        /// Chance of precipitation as a fraction, 0...1.
        public var precipitationProbability: Double?

        /// Creates a day's forecast.
        public init(
            date: CalendarDate, temperatureMinC: Double?, temperatureMaxC: Double?,
            condition: WeatherCondition, precipitationProbability: Double?
        ) {
            self.date = date
            self.temperatureMinC = temperatureMinC
            self.temperatureMaxC = temperatureMaxC
            self.condition = condition
            self.precipitationProbability = precipitationProbability
        }
    }

    /// How the request was authenticated. An open set: unknown values decode as themselves.
    public struct AuthMode: RawRepresentable, Sendable, Hashable, Codable {
        /// The wire value.
        public var rawValue: String
        /// Creates a mode from its wire value.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// Authenticated with `X-Weather-Session-Token` (this kit).
        public static let weatherSession = AuthMode(rawValue: "weather_session")
        /// Authenticated with the legacy shared `X-Weather-Token`.
        public static let weatherToken = AuthMode(rawValue: "weather_token")
    }

    /// Whether the answer came from the gateway's cache. An open set, like ``AuthMode``.
    public struct CacheStatus: RawRepresentable, Sendable, Hashable, Codable {
        /// The wire value.
        public var rawValue: String
        /// Creates a status from its wire value.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A fresh cached copy.
        public static let hit = CacheStatus(rawValue: "hit")
        /// Fetched from the provider for this request.
        public static let miss = CacheStatus(rawValue: "miss")
        /// An older cached copy, served because the provider is failing, or for the moment another
        /// request is fetching the fresh one (right after the copy's TTL): not by itself a sign of
        /// an outage, so show no "service degraded" notice on it alone.
        public static let stale = CacheStatus(rawValue: "stale")
    }
}
