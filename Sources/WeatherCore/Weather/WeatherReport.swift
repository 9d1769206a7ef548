/// The one response shape every provider is normalised to (API.md, "200 response").
///
/// Optional values encode as JSON `null`, never omitted: a value the provider lacks is `null`.
public struct WeatherReport: Codable, Sendable, Equatable {
    public var provider: String
    public var location: GridPoint
    public var timezone: String
    /// Present for `/v1/weather`, `nil` (and omitted) for `/v1/weather/trip`.
    public var current: CurrentWeather?
    public var daily: [DailyWeather]
    /// When the provider answered, wire format (`2026-11-30T02:03:11Z`).
    public var fetchedAt: String
    /// When the place's today (`daily`'s first day for a forecast) ends, in epoch seconds, from
    /// the offset the provider sent; nil when it sent none. Not part of the JSON: the cache keeps a
    /// forecast fresh no longer than this, so that `daily[0]` is not yesterday after midnight.
    public var todayEndsAt: Int64?
    /// The provider's day has not turned yet (its series starts at the place's yesterday, just
    /// after midnight) and the answer shows it: `daily` starts at yesterday, or an outlook came
    /// back short. Not part of the JSON: the cache keeps such an answer fresh only briefly.
    public var dayNotTurned = false
    /// When `daily`'s first day ends at the place, in epoch seconds: `todayEndsAt`, or a day
    /// before it when `daily` starts at yesterday; nil when the provider sent no offset. Not part
    /// of the JSON: the cache keeps it with the body, so that a stale copy served after the
    /// place's midnight leaves out the days that have ended.
    public var firstDayEndsAt: Int64?

    enum CodingKeys: String, CodingKey {
        case provider, location, timezone, current, daily, fetchedAt
    }

    public init(
        provider: String, location: GridPoint, timezone: String,
        current: CurrentWeather?, daily: [DailyWeather], fetchedAt: String, todayEndsAt: Int64? = nil
    ) {
        self.provider = provider
        self.location = location
        self.timezone = timezone
        self.current = current
        self.daily = daily
        self.fetchedAt = fetchedAt
        self.todayEndsAt = todayEndsAt
    }
}

/// Conditions now, at the snapped point.
public struct CurrentWeather: Codable, Sendable, Equatable {
    /// When the provider observed or computed the values; nil when it did not say (the fetch
    /// time would be an invented value: API.md).
    public var observedAt: String?
    public var temperatureC: Double?
    public var apparentTemperatureC: Double?
    /// Fraction 0...1.
    public var humidity: Double?
    public var windSpeedKph: Double?
    public var precipitationMmPerHour: Double?
    public var condition: WeatherCondition

    /// Conditions a provider did not send at all: every value null, the condition `unknown`.
    public static let unknown = CurrentWeather(
        observedAt: nil, temperatureC: nil, apparentTemperatureC: nil, humidity: nil,
        windSpeedKph: nil, precipitationMmPerHour: nil, condition: .unknown)

    public init(
        observedAt: String?, temperatureC: Double?, apparentTemperatureC: Double?, humidity: Double?,
        windSpeedKph: Double?, precipitationMmPerHour: Double?, condition: WeatherCondition
    ) {
        self.observedAt = observedAt
        self.temperatureC = temperatureC
        self.apparentTemperatureC = apparentTemperatureC
        self.humidity = humidity
        self.windSpeedKph = windSpeedKph
        self.precipitationMmPerHour = precipitationMmPerHour
        self.condition = condition
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(observedAt, forKey: .observedAt)
        try c.encode(temperatureC, forKey: .temperatureC)
        try c.encode(apparentTemperatureC, forKey: .apparentTemperatureC)
        try c.encode(humidity, forKey: .humidity)
        try c.encode(windSpeedKph, forKey: .windSpeedKph)
        try c.encode(precipitationMmPerHour, forKey: .precipitationMmPerHour)
        try c.encode(condition, forKey: .condition)
    }
}

/// One local calendar day at the snapped point.
public struct DailyWeather: Codable, Sendable, Equatable {
    /// `YYYY-MM-DD` in the location's own calendar.
    public var date: String
    public var temperatureMinC: Double?
    public var temperatureMaxC: Double?
    public var condition: WeatherCondition
    /// Fraction 0...1.
    public var precipitationProbability: Double?

    public init(
        date: String, temperatureMinC: Double?, temperatureMaxC: Double?,
        condition: WeatherCondition, precipitationProbability: Double?
    ) {
        self.date = date
        self.temperatureMinC = temperatureMinC
        self.temperatureMaxC = temperatureMaxC
        self.condition = condition
        self.precipitationProbability = precipitationProbability
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(date, forKey: .date)
        try c.encode(temperatureMinC, forKey: .temperatureMinC)
        try c.encode(temperatureMaxC, forKey: .temperatureMaxC)
        try c.encode(condition, forKey: .condition)
        try c.encode(precipitationProbability, forKey: .precipitationProbability)
    }
}

/// The closed vocabulary of API.md; anything a provider sends that maps to none of these is `unknown`.
public enum WeatherCondition: String, Codable, Sendable, CaseIterable {
    case clear
    case partlyCloudy = "partly_cloudy"
    case cloudy, fog, haze, wind, rain
    case heavyRain = "heavy_rain"
    case thunderstorm, sleet, snow, dust, unknown
}

extension WeatherReport {
    /// The report as the JSON body the gateway caches and sends: the fields in the order above,
    /// optional values as `null`, and `current` left out when there is none (a trip).
    public var json: [UInt8] {
        var w = JSONWriter()
        w.object { w in
            w.field("provider", provider)
            w.key("location")
            w.object { w in
                w.field("lat", location.lat)
                w.field("lon", location.lon)
            }
            w.field("timezone", timezone)
            if let current {
                w.key("current")
                w.object { w in
                    w.field("observedAt", current.observedAt)
                    w.field("temperatureC", current.temperatureC)
                    w.field("apparentTemperatureC", current.apparentTemperatureC)
                    w.field("humidity", current.humidity)
                    w.field("windSpeedKph", current.windSpeedKph)
                    w.field("precipitationMmPerHour", current.precipitationMmPerHour)
                    w.field("condition", current.condition.rawValue)
                }
            }
            w.key("daily")
            w.array { w in
                for day in daily {
                    w.object { w in
                        w.field("date", day.date)
                        w.field("temperatureMinC", day.temperatureMinC)
                        w.field("temperatureMaxC", day.temperatureMaxC)
                        w.field("condition", day.condition.rawValue)
                        w.field("precipitationProbability", day.precipitationProbability)
                    }
                }
            }
            w.field("fetchedAt", fetchedAt)
        }
        return w.bytes
    }
}
