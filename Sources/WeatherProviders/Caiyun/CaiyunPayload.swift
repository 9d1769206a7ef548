/// The parts of a Caiyun v2.6 `weather` answer the gateway reads (`ProviderObject` rules: a
/// missing or null field is `nil` and becomes JSON `null`, unknown fields are ignored, a field of
/// the wrong type fails the answer). Numbers are `Double`, which also takes `5` for `5.0`.
struct CaiyunPayload {
    struct Result {
        var realtime: Realtime?
        var daily: Daily?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            realtime = try o.object("realtime").map { o throws(ProviderFailure) in try Realtime(o) }
            daily = try o.object("daily").map { o throws(ProviderFailure) in try Daily(o) }
        }
    }

    struct Realtime {
        var status: String?
        var temperature: Double?
        var apparentTemperature: Double?
        var humidity: Double?
        var skycon: String?
        /// `wind.speed`
        var windSpeed: Double?
        /// `precipitation.local.intensity`
        var localIntensity: Double?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            status = try o.string("status")
            temperature = try o.double("temperature")
            apparentTemperature = try o.double("apparent_temperature")
            humidity = try o.double("humidity")
            skycon = try o.string("skycon")
            windSpeed = try o.object("wind")?.double("speed")
            localIntensity = try o.object("precipitation")?.object("local")?.double("intensity")
        }
    }

    struct Daily {
        var status: String?
        var temperature: [DailyTemperature]?
        var skycon: [DailyValue]?
        var precipitation: [DailyPrecipitation]?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            status = try o.string("status")
            temperature = try o.objects("temperature")?.map { o throws(ProviderFailure) in try DailyTemperature(o) }
            skycon = try o.objects("skycon")?.map { o throws(ProviderFailure) in try DailyValue(o) }
            precipitation = try o.objects("precipitation")?.map { o throws(ProviderFailure) in try DailyPrecipitation(o) }
        }
    }

    /// `date` is required: an entry without one cannot be placed on any day.
    struct DailyTemperature {
        var date: String
        var min: Double?
        var max: Double?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            date = try o.requiredString("date")
            min = try o.double("min")
            max = try o.double("max")
        }
    }

    struct DailyValue {
        var date: String
        var value: String?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            date = try o.requiredString("date")
            value = try o.string("value")
        }
    }

    struct DailyPrecipitation {
        var date: String
        /// Percent 0...100 in v2.6.
        var probability: Double?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            date = try o.requiredString("date")
            probability = try o.double("probability")
        }
    }

    // The top-level `status` is checked by `report(from:)` before this is read at all.
    var timezone: String?
    /// The place's offset to UTC in seconds (`28800` for +08:00).
    var tzshift: Double?
    var serverTime: Double?
    var result: Result?

    init(_ o: ProviderObject) throws(ProviderFailure) {
        timezone = try o.string("timezone")
        tzshift = try o.double("tzshift")
        serverTime = try o.double("server_time")
        result = try o.object("result").map { o throws(ProviderFailure) in try Result(o) }
    }
}
