import Foundation

/// A calendar day without a time or time zone, written `YYYY-MM-DD` on the wire.
///
/// Trip ranges and forecast days are days at the destination, not instants: "December 20th in
/// Tokyo" is the same day whatever the phone's time zone. Modelling them as `Date` would invite
/// off-by-one-day bugs, so they get their own small type. Ordering is chronological.
public struct CalendarDate: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The year, 1 through 9999.
    public let year: Int
    /// The month, 1 through 12.
    public let month: Int
    /// The day of the month, 1 through the length of that month.
    public let day: Int

    /// Creates a date, or `nil` when the day does not exist (month 13, February 30th, ...).
    public init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month),
            (1...Self.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses `YYYY-MM-DD` (exactly four, two and two digits), or returns `nil`.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
            parts.allSatisfy({ $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2])
        else { return nil }
        self.init(year: year, month: month, day: day)
    }

    /// The day on which `date` falls in `timeZone` (for example the trip destination's zone), in
    /// the proleptic Gregorian calendar the wire format uses (Foundation's `.gregorian` turns
    /// Julian before 1582). A `date` before year 1 or after year 9999 (an app's arithmetic gone
    /// wrong) gives 0001-01-01 or 9999-12-31, which the gateway refuses as a trip day, rather than
    /// stopping the app.
    public init(_ date: Date, in timeZone: TimeZone) {
        let local = date.timeIntervalSince1970 + Double(timeZone.secondsFromGMT(for: date))
        let days = (local / 86_400).rounded(.down)
        // 0001-01-01 and 9999-12-31, in days since 1970-01-01.
        guard days >= -719_162 else { self.init(year: 1, month: 1, day: 1)!; return }
        guard days <= 2_932_896 else { self.init(year: 9999, month: 12, day: 31)!; return }
        // Days to a civil date (Howard Hinnant's algorithm), on whole eras of 400 years.
        let z = Int(days) + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153  // 0 = March
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        self.init(year: yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month: month, day: day)!
    }

    /// `YYYY-MM-DD`, the wire form.
    public var description: String {
        func pad(_ value: Int, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))"
    }

    /// Chronological order.
    public static func < (lhs: CalendarDate, rhs: CalendarDate) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }

    /// Decodes the `YYYY-MM-DD` wire form; anything else is a `DecodingError`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        guard let value = CalendarDate(text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "Expected a YYYY-MM-DD date, got \"\(text)\"")
        }
        self = value
    }

    /// Encodes the `YYYY-MM-DD` wire form.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2:
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
            return leap ? 29 : 28
        case 4, 6, 9, 11:
            return 30
        default:
            return 31
        }
    }
}
