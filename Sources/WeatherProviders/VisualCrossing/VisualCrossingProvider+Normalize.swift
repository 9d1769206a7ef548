import WeatherCore

extension VisualCrossingProvider {
    /// Turns one timeline answer into a report: pure, no I/O, so fixtures test it directly.
    ///
    /// Non-2xx → `.httpStatus`; not JSON (Visual Crossing sends plain text for some errors) →
    /// `.unparseable`; JSON without `days` → `.providerError` if it carries `errorCode`/`message`,
    /// else `.unparseable`; no `timezone`, or (for a forecast) no `currentConditions` →
    /// `.unparseable`; a requested day missing → `.notCovered`.
    public static func report(
        from response: HTTPResult, for query: WeatherQuery, at point: GridPoint, now: Timestamp
    ) throws(ProviderFailure) -> WeatherReport {
        guard ProviderJSON.isSuccess(response.status) else {
            throw .httpStatus(response.status, retryAfter: response.retryAfterSeconds)
        }
        let payload = try VisualCrossingPayload(ProviderObject.parse(response.body))
        guard let days = payload.days else {
            throw payload.errorCode != nil || payload.message != nil ? .providerError : .unparseable
        }
        guard let timezone = Plausible.timeZoneName(payload.timezone) else { throw .unparseable }

        var current: CurrentWeather?
        if query.includesCurrent {
            // Without `currentConditions` the days are still good: a current block of nulls (a
            // value the provider lacks is null, API.md), not a 502 for the whole forecast.
            current = payload.currentConditions.map { currentWeather($0, now: now) } ?? .unknown
        }
        return WeatherReport(
            provider: providerName, location: point, timezone: timezone, current: current,
            daily: try DailySelection.pick(dailyWeather(days), for: query, localToday: Plausible.localToday(now: now, offsetSeconds: payload.tzoffset.map { $0 * 3600 })),
            fetchedAt: now.iso8601,
            todayEndsAt: Plausible.localDayEnd(now: now, offsetSeconds: payload.tzoffset.map { $0 * 3600 })?.seconds
        )
    }

    /// `datetimeEpoch` is the observation time; without a usable one `observedAt` is null.
    static func currentWeather(_ conditions: VisualCrossingPayload.Current, now: Timestamp) -> CurrentWeather {
        CurrentWeather(
            observedAt: Plausible.observedAt(conditions.datetimeEpoch, now: now),
            temperatureC: Plausible.celsius(conditions.temp),
            apparentTemperatureC: Plausible.feltCelsius(conditions.feelslike),
            humidity: DailySelection.fraction(percent: conditions.humidity),
            windSpeedKph: Plausible.kph(conditions.windspeed),
            precipitationMmPerHour: Plausible.mmPerHour(conditions.precip),
            condition: conditions.icon.map(condition(for:)) ?? .unknown
        )
    }

    /// The days keyed by their local date; the first occurrence of a repeated date wins.
    static func dailyWeather(_ days: [VisualCrossingPayload.Day]) throws(ProviderFailure) -> [LocalDate: DailyWeather] {
        var byDate: [LocalDate: DailyWeather] = [:]
        for day in days {
            guard let date = LocalDate(day.datetime) else { throw .unparseable }
            guard byDate[date] == nil else { continue }
            let (low, high) = Plausible.minMax(day.tempmin, day.tempmax)
            byDate[date] = DailyWeather(
                date: date.description,
                temperatureMinC: low,
                temperatureMaxC: high,
                condition: day.icon.map(condition(for:)) ?? .unknown,
                precipitationProbability: DailySelection.fraction(percent: day.precipprob)
            )
        }
        return byDate
    }
}
