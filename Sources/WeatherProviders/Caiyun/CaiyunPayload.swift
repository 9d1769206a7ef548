/// The parts of a Caiyun v2.6 `weather` answer the gateway reads. Everything is optional so that
/// a missing field decodes as `nil` (and becomes JSON `null`) instead of failing the whole
/// answer; unknown fields are ignored. Numbers are `Double`, which also accepts `5` for `5.0`.
struct CaiyunPayload: Decodable {
    /// Decoded first and on its own, so an error body is recognised whatever else it contains.
    struct Envelope: Decodable {
        var status: String?
    }

    struct Result: Decodable {
        var realtime: Realtime?
        var daily: Daily?
    }

    struct Realtime: Decodable {
        var status: String?
        var temperature: Double?
        var apparentTemperature: Double?
        var humidity: Double?
        var skycon: String?
        var wind: Wind?
        var precipitation: Precipitation?

        enum CodingKeys: String, CodingKey {
            case status, temperature, humidity, skycon, wind, precipitation
            case apparentTemperature = "apparent_temperature"
        }
    }

    struct Wind: Decodable {
        var speed: Double?
    }

    struct Precipitation: Decodable {
        var local: Intensity?
    }

    struct Intensity: Decodable {
        var intensity: Double?
    }

    struct Daily: Decodable {
        var status: String?
        var temperature: [DailyTemperature]?
        var skycon: [DailyValue]?
        var precipitation: [DailyPrecipitation]?
    }

    /// `date` is required: an entry without one cannot be placed on any day.
    struct DailyTemperature: Decodable {
        var date: String
        var min: Double?
        var max: Double?
    }

    struct DailyValue: Decodable {
        var date: String
        var value: String?
    }

    struct DailyPrecipitation: Decodable {
        var date: String
        /// Percent 0...100 in v2.6.
        var probability: Double?
    }

    var status: String?
    var timezone: String?
    var serverTime: Double?
    var result: Result?

    enum CodingKeys: String, CodingKey {
        case status, timezone, result
        case serverTime = "server_time"
    }
}
