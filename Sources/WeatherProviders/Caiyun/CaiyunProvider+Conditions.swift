import WeatherCore

extension CaiyunProvider {
    /// Every `skycon` code Caiyun documents, plus two legacy codes older answers still carry.
    public static let conditionTable: [String: WeatherCondition] = [
        "CLEAR_DAY": .clear, "CLEAR_NIGHT": .clear,
        "PARTLY_CLOUDY_DAY": .partlyCloudy, "PARTLY_CLOUDY_NIGHT": .partlyCloudy,
        "CLOUDY": .cloudy,
        "LIGHT_HAZE": .haze, "MODERATE_HAZE": .haze, "HEAVY_HAZE": .haze,
        "LIGHT_RAIN": .rain, "MODERATE_RAIN": .rain,
        "HEAVY_RAIN": .heavyRain, "STORM_RAIN": .heavyRain,
        "FOG": .fog,
        "LIGHT_SNOW": .snow, "MODERATE_SNOW": .snow, "HEAVY_SNOW": .snow, "STORM_SNOW": .snow,
        "DUST": .dust, "SAND": .dust,
        "WIND": .wind,
        // Legacy (pre-v2.5) codes.
        "THUNDER_SHOWER": .thunderstorm, "SLEET": .sleet,
    ]

    /// Maps a `skycon` code to the API vocabulary; codes not in the table are `.unknown`, so a new
    /// code from Caiyun degrades one field instead of failing the answer.
    public static func condition(for code: String) -> WeatherCondition {
        conditionTable[code] ?? .unknown
    }
}
