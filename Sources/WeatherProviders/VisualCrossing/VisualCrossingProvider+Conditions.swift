import WeatherCore

extension VisualCrossingProvider {
    /// Every `icon` of Visual Crossing's default and richer (`iconSet=icons2`) sets.
    public static let conditionTable: [String: WeatherCondition] = [
        "clear-day": .clear, "clear-night": .clear,
        "partly-cloudy-day": .partlyCloudy, "partly-cloudy-night": .partlyCloudy,
        "cloudy": .cloudy,
        "fog": .fog,
        "wind": .wind,
        "rain": .rain, "showers-day": .rain, "showers-night": .rain,
        "snow": .snow, "snow-showers-day": .snow, "snow-showers-night": .snow,
        "thunder-rain": .thunderstorm, "thunder-showers-day": .thunderstorm, "thunder-showers-night": .thunderstorm,
        "sleet": .sleet, "rain-snow": .sleet, "hail": .sleet,
    ]

    /// Maps an `icon` to the API vocabulary; icons not in the table are `.unknown`, so a new icon
    /// degrades one field instead of failing the answer.
    public static func condition(for code: String) -> WeatherCondition {
        conditionTable[code] ?? .unknown
    }
}
