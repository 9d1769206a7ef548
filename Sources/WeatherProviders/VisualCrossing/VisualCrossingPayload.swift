/// The parts of a Visual Crossing timeline answer the gateway reads (`unitGroup=metric`), with
/// the `ProviderObject` rules: everything but a day's `datetime` is optional, a missing or null
/// value is `nil`, unknown fields are ignored, a field of the wrong type fails the answer, and
/// `Double` also takes `5` for `5.0`.
struct VisualCrossingPayload {
    struct Day {
        /// Local date `YYYY-MM-DD`; required, a day without it cannot be placed.
        var datetime: String
        var tempmin: Double?
        var tempmax: Double?
        /// Percent 0...100; `null` on far dates served from statistics.
        var precipprob: Double?
        var icon: String?
        /// The day's local midnight, epoch seconds: when the day begins, whatever the offset
        /// does that day.
        var datetimeEpoch: Double?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            datetime = try o.requiredString("datetime")
            datetimeEpoch = try o.double("datetimeEpoch")
            tempmin = try o.double("tempmin")
            tempmax = try o.double("tempmax")
            precipprob = try o.double("precipprob")
            icon = try o.string("icon")
        }
    }

    struct Current {
        var datetimeEpoch: Double?
        var temp: Double?
        var feelslike: Double?
        /// Percent 0...100.
        var humidity: Double?
        /// km/h with `unitGroup=metric`.
        var windspeed: Double?
        /// mm over the last hour with `unitGroup=metric`, i.e. mm/h.
        var precip: Double?
        var icon: String?

        init(_ o: ProviderObject) throws(ProviderFailure) {
            datetimeEpoch = try o.double("datetimeEpoch")
            temp = try o.double("temp")
            feelslike = try o.double("feelslike")
            humidity = try o.double("humidity")
            windspeed = try o.double("windspeed")
            precip = try o.double("precip")
            icon = try o.string("icon")
        }
    }

    var timezone: String?
    /// The place's offset to UTC in hours (`-5.0`).
    var tzoffset: Double?
    var days: [Day]?
    var currentConditions: Current?
    /// Present on JSON error bodies instead of `days`.
    var errorCode: Int?
    var message: String?

    init(_ o: ProviderObject) throws(ProviderFailure) {
        timezone = try o.string("timezone")
        tzoffset = try o.double("tzoffset")
        days = try o.objects("days")?.map { o throws(ProviderFailure) in try Day(o) }
        currentConditions = try o.object("currentConditions").map { o throws(ProviderFailure) in try Current(o) }
        errorCode = try o.int("errorCode")
        message = try o.string("message")
    }
}
