import WeatherCore

/// Picks exactly the days a query asked for out of what a provider returned. One function for
/// both providers, so "covers exactly the days asked" means the same thing everywhere.
enum DailySelection {
    /// - Parameter days: the provider's days keyed by local date (first occurrence of a date wins).
    /// - Returns: `.forecast(n)`: the first `n` days in date order (providers start at local today);
    ///   `.trip(start, end)`: every date of `start...end` in order; `.outlook`: the first
    ///   `WeatherQuery.maxDays` days in date order, or all there are.
    /// - Throws: `.notCovered` when the provider returned fewer days than asked (for an outlook,
    ///   none), so the chain can try the next provider instead of answering with a short list.
    static func pick(_ days: [LocalDate: DailyWeather], for query: WeatherQuery) throws(ProviderFailure) -> [DailyWeather] {
        switch query {
        case .forecast(let count):
            precondition(count > 0, "forecast needs at least one day")
            let sorted = days.keys.sorted()
            guard sorted.count >= count else { throw .notCovered }
            return sorted.prefix(count).map { days[$0]! }
        case .outlook:
            guard !days.isEmpty else { throw .notCovered }
            return days.keys.sorted().prefix(WeatherQuery.maxDays).map { days[$0]! }
        case .trip(let start, let end):
            precondition(start <= end, "trip start must not be after its end")
            var picked: [DailyWeather] = []
            for offset in 0...(end.daysSinceEpoch - start.daysSinceEpoch) {
                guard let day = days[start.adding(days: offset)] else { throw .notCovered }
                picked.append(day)
            }
            return picked
        }
    }

    /// Percent (0...100) to the API's fraction (0...1), rounded to 4 decimals so `32.3` becomes
    /// `0.323` rather than `0.32299999999999995`, and clamped against provider rounding.
    static func fraction(percent: Double?) -> Double? {
        guard let percent else { return nil }
        return fraction((percent * 100).rounded() / 10_000)
    }

    /// A value that is already a fraction, clamped to 0...1.
    static func fraction(_ value: Double?) -> Double? {
        guard let value else { return nil }
        return min(1, max(0, value))
    }
}
