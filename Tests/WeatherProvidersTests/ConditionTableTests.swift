import Testing
import WeatherCore
import WeatherProviders

@Suite struct ConditionTableTests {
    /// The documented `skycon` codes (provider-fixtures/README.md) and two legacy ones.
    static let caiyun: [String: WeatherCondition] = [
        "CLEAR_DAY": .clear, "CLEAR_NIGHT": .clear, "PARTLY_CLOUDY_DAY": .partlyCloudy,
        "PARTLY_CLOUDY_NIGHT": .partlyCloudy, "CLOUDY": .cloudy, "LIGHT_HAZE": .haze,
        "MODERATE_HAZE": .haze, "HEAVY_HAZE": .haze, "LIGHT_RAIN": .rain, "MODERATE_RAIN": .rain,
        "HEAVY_RAIN": .heavyRain, "STORM_RAIN": .heavyRain, "FOG": .fog, "LIGHT_SNOW": .snow,
        "MODERATE_SNOW": .snow, "HEAVY_SNOW": .snow, "STORM_SNOW": .snow, "DUST": .dust, "SAND": .dust,
        "WIND": .wind, "THUNDER_SHOWER": .thunderstorm, "SLEET": .sleet,
    ]

    /// The documented `icon` values, default and richer set.
    static let visualCrossing: [String: WeatherCondition] = [
        "clear-day": .clear, "clear-night": .clear, "partly-cloudy-day": .partlyCloudy,
        "partly-cloudy-night": .partlyCloudy, "cloudy": .cloudy, "fog": .fog, "wind": .wind, "rain": .rain,
        "snow": .snow, "showers-day": .rain, "showers-night": .rain, "thunder-rain": .thunderstorm,
        "thunder-showers-day": .thunderstorm, "thunder-showers-night": .thunderstorm,
        "snow-showers-day": .snow, "snow-showers-night": .snow, "sleet": .sleet, "rain-snow": .sleet, "hail": .sleet,
    ]

    @Test(arguments: caiyun.keys.sorted())
    func everyDocumentedCaiyunCodeMaps(code: String) {
        #expect(CaiyunProvider.condition(for: code) == Self.caiyun[code])
        #expect(CaiyunProvider.condition(for: code) != .unknown)
    }

    @Test(arguments: visualCrossing.keys.sorted())
    func everyDocumentedVisualCrossingIconMaps(icon: String) {
        #expect(VisualCrossingProvider.condition(for: icon) == Self.visualCrossing[icon])
        #expect(VisualCrossingProvider.condition(for: icon) != .unknown)
    }

    @Test func tablesHoldExactlyTheDocumentedCodes() {
        #expect(CaiyunProvider.conditionTable == Self.caiyun)
        #expect(VisualCrossingProvider.conditionTable == Self.visualCrossing)
        // Caiyun's codes reach every condition of the API vocabulary but `unknown`.
        #expect(Set(CaiyunProvider.conditionTable.values) == Set(WeatherCondition.allCases).subtracting([.unknown]))
    }

    @Test(arguments: ["", "TORNADO", "cloudy", "clear_day", "Clear-Day", "CLOUDY "])
    func unknownCaiyunCodesAreUnknown(code: String) {
        #expect(CaiyunProvider.condition(for: code) == .unknown)
    }

    @Test(arguments: ["", "tornado", "CLOUDY", "clear_day", "partly-cloudy", "rain "])
    func unknownVisualCrossingIconsAreUnknown(icon: String) {
        #expect(VisualCrossingProvider.condition(for: icon) == .unknown)
    }
}
