/// The parts of a Visual Crossing timeline answer the gateway reads (`unitGroup=metric`).
/// Everything but a day's `datetime` is optional: a missing value decodes as `nil`, unknown
/// fields are ignored, and `Double` also accepts `5` for `5.0`.
struct VisualCrossingPayload: Decodable {
    struct Day: Decodable {
        /// Local date `YYYY-MM-DD`; required, a day without it cannot be placed.
        var datetime: String
        var tempmin: Double?
        var tempmax: Double?
        /// Percent 0...100; `null` on far dates served from statistics.
        var precipprob: Double?
        var icon: String?
    }

    struct Current: Decodable {
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
    }

    var timezone: String?
    var days: [Day]?
    var currentConditions: Current?
    /// Present on JSON error bodies instead of `days`.
    var errorCode: Int?
    var message: String?
}
