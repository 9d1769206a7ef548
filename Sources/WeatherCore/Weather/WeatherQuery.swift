/// What a client asked for, after validation: the next `days` days, or a trip's dates.
public enum WeatherQuery: Sendable, Hashable {
    /// Now and the next `days` local days, today included (1...15).
    case forecast(days: Int)
    /// The local days `start...end` inclusive, no current conditions.
    case trip(start: LocalDate, end: LocalDate)
    /// Now and as many of the next `maxDays` local days as the provider has, at least one: what
    /// a cell's forecast is fetched and cached as, once for every `days` and for the trips it
    /// holds (`ReportSlice` cuts each answer from it). Providers send 15 days for one record.
    case outlook

    /// The most days a forecast or a trip may ask for (API.md).
    public static let maxDays = 15

    /// The cache's name for this request kind at one cell, e.g. `forecast` (the outlook),
    /// `forecast:7` or `trip:2026-12-20:2026-12-24`.
    public var cacheKind: String {
        if let tripKind = tripCacheKind { return tripKind }
        return ByteWriter.text(capacity: Self.maxForecastKindBytes) { writeCacheKind(to: &$0) }
    }

    /// A trip's `cacheKind`, nil for the other kinds (which `writeCacheKind` writes).
    var tripCacheKind: String? {
        if case .trip(let start, let end) = self { return "trip:\(start):\(end)" }
        return nil
    }

    /// The most bytes `writeCacheKind` writes: `forecast:` and an `Int`.
    static let maxForecastKindBytes = 9 + 20

    /// The bytes of `cacheKind`. `w` must have room for them: `maxForecastKindBytes` for a
    /// forecast or the outlook, `tripCacheKind`'s count for a trip.
    func writeCacheKind(to w: inout ByteWriter) {
        switch self {
        case .forecast(let days):
            w.write("forecast:")
            w.write(decimal: days)
        case .outlook:
            w.write("forecast")
        case .trip:
            w.write(tripCacheKind ?? "")
        }
    }

    /// Whether the answer has `current` (a trip's has not).
    public var includesCurrent: Bool {
        if case .trip = self { return false }
        return true
    }
}
