/// A calendar date without a zone, `YYYY-MM-DD`.
public struct LocalDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    public var year: Int
    public var month: Int
    public var day: Int

    public init?(year: Int, month: Int, day: Int) {
        guard (1...9999).contains(year), (1...12).contains(month),
            (1...LocalDate.daysIn(month: month, year: year)).contains(day)
        else { return nil }
        self.year = year
        self.month = month
        self.day = day
    }

    /// Parses exactly `YYYY-MM-DD`; anything else is `nil`.
    public init?(_ text: some StringProtocol) {
        let u = Array(text.utf8)
        guard u.count == 10, u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-") else { return nil }
        func num(_ r: Range<Int>) -> Int? {
            var n = 0
            for i in r {
                guard u[i] >= 48 && u[i] <= 57 else { return nil }
                n = n * 10 + Int(u[i] - 48)
            }
            return n
        }
        guard let y = num(0..<4), let m = num(5..<7), let d = num(8..<10) else { return nil }
        self.init(year: y, month: m, day: d)
    }

    public var description: String {
        guard hasFourDigitYear else { return "\(year)-\(month < 10 ? "0" : "")\(month)-\(day < 10 ? "0" : "")\(day)" }
        return String(unsafeUninitializedCapacity: 10) { buf in
            writeDigits(into: buf)
            return 10
        }
    }

    /// Years 0...9999 print as exactly four digits; only those take the byte-level path.
    var hasFourDigitYear: Bool { (0...9999).contains(year) }

    /// `YYYY-MM-DD` into the first 10 bytes of `buf`; only when `hasFourDigitYear`.
    func writeDigits(into buf: UnsafeMutableBufferPointer<UInt8>) {
        writeTwoDigits(year / 100, into: buf, at: 0)
        writeTwoDigits(year % 100, into: buf, at: 2)
        buf[4] = UInt8(ascii: "-")
        writeTwoDigits(month, into: buf, at: 5)
        buf[7] = UInt8(ascii: "-")
        writeTwoDigits(day, into: buf, at: 8)
    }

    /// Days since 1970-01-01 (proleptic Gregorian), for date arithmetic without Foundation.
    public var daysSinceEpoch: Int {
        // Howard Hinnant's days_from_civil.
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// The date `daysSinceEpoch` days after 1970-01-01.
    public init(daysSinceEpoch z0: Int) {
        let z = z0 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        self.year = yoe + era * 400 + (m <= 2 ? 1 : 0)
        self.month = m
        self.day = d
    }

    /// The date `days` later (earlier when negative).
    public func adding(days: Int) -> LocalDate { LocalDate(daysSinceEpoch: daysSinceEpoch + days) }

    /// The same month and day `years` later; 29 February becomes 28 February in a common year.
    public func adding(years: Int) -> LocalDate {
        let y = year + years
        var copy = self
        copy.year = y
        copy.day = min(day, LocalDate.daysIn(month: month, year: y))
        return copy
    }

    public static func < (a: LocalDate, b: LocalDate) -> Bool { a.daysSinceEpoch < b.daysSinceEpoch }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}
