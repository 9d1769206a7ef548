import WeatherCore

extension CaiyunProvider {
    /// Turns one Caiyun answer into a report: pure, no I/O, so fixtures test it directly.
    ///
    /// Non-2xx → `.httpStatus`; not JSON → `.notJSON`; `status != "ok"` → `.providerError`;
    /// no `timezone`, `result.daily`, daily series, or (for a forecast) `result.realtime` →
    /// `.unparseable`; fewer days than asked → `.notCovered`. An echoed `unit` other than the one
    /// asked for is `.unparseable` too: its numbers would be Fahrenheit or mph labelled as metric.
    public static func report(
        from response: HTTPResult, for query: WeatherQuery, at point: GridPoint, now: Timestamp
    ) throws(ProviderFailure) -> WeatherReport {
        guard ProviderJSON.isSuccess(response.status) else {
            throw .httpStatus(response.status, retryAfter: response.retryAfterSeconds)
        }
        let answer = try ProviderObject.parse(response.body)
        // Read first and alone, so an error answer is recognised whatever else it contains.
        guard try answer.string("status") == "ok" else { throw .providerError }
        if let unit = try answer.string("unit"), unit != unitSystem { throw .unparseable }
        let payload = try CaiyunPayload(answer)
        guard let timezone = Plausible.timeZoneName(payload.timezone), let result = payload.result, let daily = result.daily else {
            throw .unparseable
        }
        if let status = daily.status, status != "ok" { throw .providerError }

        let days = try dailyWeather(daily)
        var current: CurrentWeather?
        if query.includesCurrent {
            // Without `realtime` the days are still good: a current block of nulls (a value the
            // provider lacks is null, API.md), not a 502 for the whole forecast.
            if let realtime = result.realtime {
                if let status = realtime.status, status != "ok" { throw .providerError }
                current = currentWeather(realtime, serverTime: payload.serverTime, now: now)
            } else {
                current = .unknown
            }
        }
        let today = Plausible.localToday(now: now, offsetSeconds: payload.tzshift)
        let picked = try DailySelection.pick(days, for: query, localToday: today)
        var report = WeatherReport(
            provider: providerName, location: point, timezone: timezone, current: current, daily: picked,
            fetchedAt: now.iso8601,
            todayEndsAt: Plausible.localDayEnd(now: now, offsetSeconds: payload.tzshift)?.seconds
        )
        DailySelection.mark(&report, from: days, for: query, localToday: today, now: now)
        return report
    }

    /// `server_time` is when Caiyun computed the answer, the closest thing to an observation time
    /// it sends; without it (or with one no wire timestamp can carry) `observedAt` is null: the
    /// fetch time would be an invented observation.
    static func currentWeather(_ realtime: CaiyunPayload.Realtime, serverTime: Double?, now: Timestamp) -> CurrentWeather {
        CurrentWeather(
            observedAt: Plausible.observedAt(serverTime, now: now),
            temperatureC: Plausible.celsius(realtime.temperature),
            apparentTemperatureC: Plausible.feltCelsius(realtime.apparentTemperature),
            humidity: DailySelection.fraction(realtime.humidity),  // already 0...1
            windSpeedKph: Plausible.kph(realtime.windSpeed),  // metric:v2 → km/h
            precipitationMmPerHour: Plausible.mmPerHour(realtime.localIntensity),  // metric:v2 → mm/h
            condition: realtime.skycon.map(condition(for:)) ?? .unknown
        )
    }

    /// Joins the separate daily series on their local date. A day present in one series but not
    /// another keeps `null`/`unknown` for what is missing rather than being dropped.
    static func dailyWeather(_ daily: CaiyunPayload.Daily) throws(ProviderFailure) -> [LocalDate: DailyWeather] {
        guard daily.temperature != nil || daily.skycon != nil || daily.precipitation != nil else {
            throw .unparseable
        }
        var days: [LocalDate: DailyWeather] = [:]
        func day(_ text: String) throws(ProviderFailure) -> LocalDate {
            let date = try localDate(text)
            if days[date] == nil {
                days[date] = DailyWeather(
                    date: date.description, temperatureMinC: nil, temperatureMaxC: nil,
                    condition: .unknown, precipitationProbability: nil
                )
            }
            return date
        }
        // Iterating in reverse lets the first entry of a duplicated date win.
        for entry in (daily.temperature ?? []).reversed() {
            let d = try day(entry.date)
            (days[d]!.temperatureMinC, days[d]!.temperatureMaxC) = Plausible.minMax(entry.min, entry.max)
        }
        for entry in (daily.skycon ?? []).reversed() {
            let d = try day(entry.date)
            days[d]!.condition = entry.value.map(condition(for:)) ?? .unknown
        }
        for entry in (daily.precipitation ?? []).reversed() {
            let d = try day(entry.date)
            days[d]!.precipitationProbability = DailySelection.fraction(percent: entry.probability)
        }
        return days
    }

    /// `2026-11-30T00:00+08:00` → `2026-11-30`: the local date is the text before the `T`, which
    /// is exactly the calendar day the client means; converting to UTC would shift it.
    static func localDate(_ text: String) throws(ProviderFailure) -> LocalDate {
        guard let date = LocalDate(text.prefix(10)) else { throw .unparseable }
        return date
    }
}
