import WeatherCore

extension VisualCrossingProvider {
    /// Turns one timeline answer into a report: pure, no I/O, so fixtures test it directly.
    ///
    /// Non-2xx → `.httpStatus`; not JSON (Visual Crossing sends plain text for its errors, with
    /// their 4xx status) → `.notJSON`; JSON without `days` → `.providerError` if it carries `errorCode`/`message`,
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
        let offset = payload.tzoffset.map { $0 * 3600 }
        let today = Self.today(in: days, now: now)
        let localToday = today?.date ?? Plausible.localToday(now: now, offsetSeconds: offset)
        let byDate = try dailyWeather(days)
        let picked = try DailySelection.pick(byDate, for: query, localToday: localToday)
        var report = WeatherReport(
            provider: providerName, location: point, timezone: timezone, current: current, daily: picked,
            fetchedAt: now.iso8601,
            todayEndsAt: today?.endsAt ?? Plausible.localDayEnd(now: now, offsetSeconds: offset)?.seconds
        )
        DailySelection.mark(&report, from: byDate, for: query, localToday: localToday, now: now)
        return report
    }

    /// The sent day that holds `now`, by the days' own midnights (`datetimeEpoch`), and when it
    /// ends; nil when none does (the series starts later, or says no midnights). Preferred to
    /// the top-level `tzoffset`, which Visual Crossing gives once for the whole answer: on a day
    /// the clocks change, an offset of the day's start put its last hour into the next day, and
    /// today was left out (a black-box date audit).
    static func today(in days: [VisualCrossingPayload.Day], now: Timestamp) -> (date: LocalDate, endsAt: Int64)? {
        for (i, day) in days.enumerated() {
            guard let start = day.datetimeEpoch.flatMap(Timestamp.init(epochSeconds:)), start.seconds <= now.seconds,
                let date = LocalDate(day.datetime)
            else { continue }
            // A day lasts 23 to 25 hours; the next day's midnight ends it when it is sent.
            let next = i + 1 < days.count ? days[i + 1].datetimeEpoch.flatMap(Timestamp.init(epochSeconds:)) : nil
            let end = next.map(\.seconds) ?? start.seconds + 86_400
            guard end > now.seconds, end - start.seconds <= 25 * 3600, end - start.seconds >= 23 * 3600 else { continue }
            return (date, end)
        }
        return nil
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
