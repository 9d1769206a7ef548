import WeatherCore

/// Picks exactly the days a query asked for out of what a provider returned. One function for
/// both providers, so "covers exactly the days asked" means the same thing everywhere.
enum DailySelection {
    /// - Parameters:
    ///   - days: the provider's days keyed by local date (first occurrence of a date wins).
    ///   - localToday: the place's date now (`Plausible.localToday`), nil when the provider sent no offset.
    /// - Returns: `.forecast(n)`: `n` consecutive days from the first not before the place's
    ///   today; `.trip(start, end)`: every date of `start...end` in order; `.outlook`: those
    ///   consecutive days, at most `WeatherQuery.maxDays`.
    /// - Throws: `.notCovered` when the provider returned fewer days than asked (for an outlook,
    ///   none) or skipped one, so the chain can try the next provider instead of answering with
    ///   days other than those asked (API.md: `daily` covers exactly the days asked).
    static func pick(_ days: [LocalDate: DailyWeather], for query: WeatherQuery, localToday: LocalDate? = nil) throws(ProviderFailure) -> [DailyWeather] {
        switch query {
        case .forecast(let count):
            precondition(count > 0, "forecast needs at least one day")
            let run = consecutiveDays(days, from: localToday, atLeast: count)
            guard run.count >= count else { throw .notCovered }
            return run.prefix(count).map { days[$0]! }
        case .outlook:
            let run = consecutiveDays(days, from: localToday, atLeast: 1)
            guard !run.isEmpty else { throw .notCovered }
            return run.prefix(WeatherQuery.maxDays).map { days[$0]! }
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

    /// Marks `report`, whose `daily` was picked from `days` for `query`, with what the cache needs
    /// to know of the place's days: `dayNotTurned` and `firstDayEndsAt`.
    static func mark(_ report: inout WeatherReport, from days: [LocalDate: DailyWeather], for query: WeatherQuery, localToday: LocalDate?, now: Timestamp) {
        report.dayNotTurned = dayNotTurned(
            days, picked: report.daily, for: query, localToday: localToday, todayEndsAt: report.todayEndsAt, now: now)
        report.firstDayEndsAt = firstDayEnd(of: report.daily, localToday: localToday, todayEndsAt: report.todayEndsAt)
    }

    /// When the first of `picked` ends at the place: `todayEndsAt`, a day earlier for each day the
    /// first lies before `localToday` (yesterday, from a provider whose day has not turned),
    /// counting days of 24 hours; nil without an end, a today or a dated first day.
    static func firstDayEnd(of picked: [DailyWeather], localToday: LocalDate?, todayEndsAt: Int64?) -> Int64? {
        guard let end = todayEndsAt, let today = localToday, let first = picked.first.flatMap({ LocalDate($0.date) }) else { return nil }
        return end - Int64(today.daysSinceEpoch - first.daysSinceEpoch) * 86_400
    }

    /// Whether `picked`, chosen from `days` for `query`, shows a provider whose day has not
    /// turned yet: in the first two hours of the place's day (`todayEndsAt`, from now; a day of
    /// 23 or 25 hours by Visual Crossing's own midnights moves that by its hour), its
    /// series starts exactly at the place's yesterday, and the answer starts there too, or is
    /// an outlook short of `WeatherQuery.maxDays` (yesterday left out). A series that only has a
    /// stray yesterday besides every day asked is not one, nor one that starts at yesterday all
    /// day long (kept a minute, it would cost a call a minute for every cell).
    static func dayNotTurned(
        _ days: [LocalDate: DailyWeather], picked: [DailyWeather], for query: WeatherQuery,
        localToday: LocalDate?, todayEndsAt: Int64?, now: Timestamp
    ) -> Bool {
        guard query.includesCurrent, let today = localToday, let end = todayEndsAt, end - now.seconds > 86_400 - 7_200,
            days.keys.min() == today.adding(days: -1)
        else { return false }
        if let first = picked.first.flatMap({ LocalDate($0.date) }), first < today { return true }
        return query == .outlook && picked.count < WeatherQuery.maxDays
    }

    /// The dates of `days` from the first one on, as long as none is skipped; days before the
    /// place's today (a stray yesterday in one series) are left out when the provider's offset
    /// tells that today and `needed` days remain without them. A series that still starts at
    /// yesterday in the place's first minutes after midnight (the provider's day not turned yet;
    /// a forecast asks for exactly the days it needs) is taken from its first day rather than
    /// refused: a review found that refusal made every Caiyun-only forecast a 502 then. A series
    /// that starts after today is taken as it comes too: this gateway's clock and the provider's
    /// may disagree about a day's start, and the fixture tests' clocks do.
    static func consecutiveDays(_ days: [LocalDate: DailyWeather], from today: LocalDate?, atLeast needed: Int) -> [LocalDate] {
        let sorted = days.keys.sorted()
        guard let today else { return run(of: sorted) }
        let fromToday = run(of: sorted.filter { $0 >= today })
        guard fromToday.count < needed else { return fromToday }
        // Only a series that starts exactly at yesterday and runs on through today is taken from
        // its first day (a re-review: any shortfall fell back, so a gap after today, or a series
        // wholly in the past, was served with yesterday as `daily[0]`).
        let whole = run(of: sorted)
        guard whole.first == today.adding(days: -1), whole.count >= 2 else { return fromToday }
        return whole
    }

    /// The dates of `sorted` from its first on, as long as none is skipped.
    static func run(of sorted: [LocalDate]) -> [LocalDate] {
        guard let first = sorted.first else { return [] }
        var run = [first]
        for date in sorted.dropFirst() {
            guard date == run[run.count - 1].adding(days: 1) else { break }
            run.append(date)
        }
        return run
    }

    /// Percent (0...100) to the API's fraction (0...1), rounded to 4 decimals so `32.3` becomes
    /// `0.323` rather than `0.32299999999999995`, and clamped against provider rounding. A value
    /// beyond that rounding is not a percent at all: null, not a confident 0 or 1.
    static func fraction(percent: Double?) -> Double? {
        guard let percent, (-0.5...100.5).contains(percent) else { return nil }
        return fraction((percent * 100).rounded() / 10_000)
    }

    /// A value that is already a fraction, clamped to 0...1 against rounding; one beyond that
    /// (a percent where a fraction belongs: 62 clamped to 1) is null.
    static func fraction(_ value: Double?) -> Double? {
        guard let value, (-0.005...1.005).contains(value) else { return nil }
        return min(1, max(0, value))
    }
}
