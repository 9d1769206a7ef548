/// The normalised sky condition the gateway reports, whichever provider it asked.
///
/// A value this version of the app does not know (the server added one later) decodes as
/// ``unknown`` instead of failing the whole forecast.
public enum WeatherCondition: String, Sendable, Hashable, Codable, CaseIterable {
    /// `clear`
    case clear
    /// `partly_cloudy`
    case partlyCloudy = "partly_cloudy"
    /// `cloudy`
    case cloudy
    /// `fog`
    case fog
    /// `haze`
    case haze
    /// `wind`
    case wind
    /// `rain`
    case rain
    /// `heavy_rain`
    case heavyRain = "heavy_rain"
    /// `thunderstorm`
    case thunderstorm
    /// `sleet`
    case sleet
    /// `snow`
    case snow
    /// `dust`
    case dust
    /// `unknown`: the provider's code had no match, or this app predates the server's value.
    case unknown

    /// Decodes a wire value; one this version does not know becomes ``unknown``.
    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        self = WeatherCondition(rawValue: raw) ?? .unknown
    }
}
