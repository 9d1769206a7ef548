import WeatherCore

/// Values no place on Earth has, or no wire field can mean, read as the provider lacking them:
/// null (API.md: a value the provider lacks is null, never invented), not passed on as a
/// confident 1000 °C. The bounds are wide: they catch a unit mix-up or garbage, not weather.
enum Plausible {
    /// Air temperature in °C: the records are −89.2 and 56.7.
    static func celsius(_ value: Double?) -> Double? { within(-100...70, value) }
    /// A felt (apparent) temperature in °C: heat indices of 74 and 81 have been recorded.
    static func feltCelsius(_ value: Double?) -> Double? { within(-100...100, value) }
    /// Wind speed in km/h: the strongest gust measured is 408.
    static func kph(_ value: Double?) -> Double? { within(0...500, value) }
    /// Precipitation intensity in mm/h.
    static func mmPerHour(_ value: Double?) -> Double? { within(0...1000, value) }

    /// The place's date now, from the offset to UTC its provider sends (Caiyun `tzshift` in
    /// seconds, Visual Crossing `tzoffset` in hours, given here in seconds); nil without one, or
    /// with one no place has (beyond ±14 h).
    static func localToday(now: Timestamp, offsetSeconds: Double?) -> LocalDate? {
        offset(offsetSeconds).map { now.adding(seconds: $0).utcDate }
    }

    /// When the place's date now ends (its next midnight, as a UTC instant), from the same offset;
    /// nil without one. By the offset of now: a clock change before midnight (Santiago's, Havana's
    /// at 00:00) moves the real midnight by that hour.
    static func localDayEnd(now: Timestamp, offsetSeconds: Double?) -> Timestamp? {
        offset(offsetSeconds).map { offset in
            let intoDay = (((now.seconds + offset) % 86_400) + 86_400) % 86_400
            return now.adding(seconds: 86_400 - intoDay)
        }
    }

    /// A provider's offset to UTC in whole seconds; nil without one, or with one no place has
    /// (beyond ±14 h).
    static func offset(_ seconds: Double?) -> Int64? {
        guard let seconds, seconds.isFinite, abs(seconds) <= 14 * 3600 else { return nil }
        return Int64(seconds.rounded())
    }

    static func within(_ range: ClosedRange<Double>, _ value: Double?) -> Double? {
        guard let value, range.contains(value) else { return nil }
        return value
    }

    /// A day's minimum above its maximum says nothing sure of either: both null.
    static func minMax(_ min: Double?, _ max: Double?) -> (min: Double?, max: Double?) {
        let low = celsius(min), high = celsius(max)
        if let low, let high, low > high { return (nil, nil) }
        return (low, high)
    }

    /// An observation time no later than an hour from now and no older than a day: `server_time`
    /// 0 read as 1970, or one a year ahead, is no observation time.
    static func observedAt(_ epochSeconds: Double?, now: Timestamp) -> String? {
        guard let time = epochSeconds.flatMap(Timestamp.init(epochSeconds:)),
            time.seconds >= now.seconds - 86_400, time.seconds <= now.seconds + 3600
        else { return nil }
        return time.iso8601
    }

    /// An IANA time zone name as clients read one (`Asia/Shanghai`, `America/Argentina/Buenos_Aires`,
    /// `Etc/GMT+8`, `UTC`): ASCII letters, digits, `/`, `_`, `-`, `+`, starting with a letter, at
    /// most 64 bytes. Anything else (empty, another script, control bytes) is no name an app's
    /// `TimeZone(identifier:)` knows.
    static func timeZoneName(_ text: String?) -> String? {
        guard let text, (1...64).contains(text.utf8.count), let first = text.utf8.first,
            (65...90).contains(first) || (97...122).contains(first)
        else { return nil }
        let allowed = text.utf8.allSatisfy { c in
            (48...57).contains(c) || (65...90).contains(c) || (97...122).contains(c)
                || c == UInt8(ascii: "/") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-") || c == UInt8(ascii: "+")
        }
        return allowed ? text : nil
    }
}
