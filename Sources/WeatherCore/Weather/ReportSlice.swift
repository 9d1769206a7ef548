/// Cuts one request's answer out of a cell's stored outlook (`WeatherQuery.outlook`), on the
/// stored bytes: the members stay as they were written (`WeatherReport.json`), numbers are not
/// parsed and written again, and only `daily` (and, for a trip, `current`) changes.
///
/// Runs once per worker, cell and kind of answer while the outlook is fresh (the worker keeps
/// the cut in `FreshBodies`), so it costs a cached request nothing.
public enum ReportSlice {
    /// `body` with `daily` cut to its first `days` entries; nil when it has fewer, or is not a
    /// report.
    public static func forecast(_ body: [UInt8], days: Int) -> [UInt8]? {
        guard days > 0, let report = Parts(body), report.days.count >= days else { return nil }
        if report.days.count == days { return body }
        return report.joined(days: report.days.prefix(days), keepingCurrent: true)
    }

    /// `body` without the first `count` entries of `daily`; nil when no entry would be left, or
    /// it is not a report.
    public static func dropping(days count: Int, from body: [UInt8]) -> [UInt8]? {
        guard let report = Parts(body), report.days.count > count else { return nil }
        if count <= 0 { return body }
        return report.joined(days: report.days.dropFirst(count), keepingCurrent: true)
    }

    /// `body` without `current`, with `daily` cut to the dates `start...end`; nil unless every
    /// one of them is there, in order.
    public static func trip(_ body: [UInt8], start: LocalDate, end: LocalDate) -> [UInt8]? {
        guard start <= end, let report = Parts(body), let first = report.days.firstIndex(where: { $0.date == start }) else { return nil }
        let count = end.daysSinceEpoch - start.daysSinceEpoch + 1
        guard first + count <= report.days.count else { return nil }
        let picked = report.days[first..<(first + count)]
        for (offset, day) in picked.enumerated() where day.date != start.adding(days: offset) { return nil }
        return report.joined(days: picked, keepingCurrent: false)
    }

    /// Where each top-level member and each day of `daily` is in the body.
    struct Parts {
        struct Member {
            var name: String
            /// From the key's opening quote to the end of the value.
            var text: Range<Int>
        }
        struct Day {
            var date: LocalDate?
            var text: Range<Int>
        }
        let bytes: [UInt8]
        var members: [Member] = []
        var days: [Day] = []

        init?(_ body: [UInt8]) {
            bytes = body
            var s = JSONScanner(body, maxDepth: 8)
            do throws(JSONScanner.Invalid) {
                s.skipSpace()
                try s.expect(UInt8(ascii: "{"))
                s.skipSpace()
                var sawDaily = false
                repeat {
                    let start = s.i
                    let name = try s.string()
                    s.skipSpace()
                    try s.expect(UInt8(ascii: ":"))
                    s.skipSpace()
                    if name == "daily" {
                        sawDaily = true
                        days = try Self.days(&s)
                    } else {
                        try s.skipValue(depth: 1)
                    }
                    members.append(Member(name: name, text: start..<s.i))
                } while try s.another(before: UInt8(ascii: "}"))
                s.skipSpace()
                guard s.atEnd, sawDaily else { return nil }
            } catch {
                return nil
            }
        }

        /// The array at the cursor: each element's place and its `date`.
        static func days(_ s: inout JSONScanner) throws(JSONScanner.Invalid) -> [Day] {
            try s.expect(UInt8(ascii: "["))
            s.skipSpace()
            var days: [Day] = []
            if s.peek == UInt8(ascii: "]") {
                s.i += 1
                return days
            }
            repeat {
                let start = s.i
                var date: LocalDate?
                try s.expect(UInt8(ascii: "{"))
                s.skipSpace()
                if s.peek != UInt8(ascii: "}") {
                    repeat {
                        let key = try s.string()
                        s.skipSpace()
                        try s.expect(UInt8(ascii: ":"))
                        s.skipSpace()
                        if key == "date", s.peek == UInt8(ascii: "\"") {
                            date = LocalDate(try s.string())
                        } else {
                            try s.skipValue(depth: 3)
                        }
                    } while try s.another(before: UInt8(ascii: "}"))
                } else {
                    s.i += 1
                }
                days.append(Day(date: date, text: start..<s.i))
            } while try s.another(before: UInt8(ascii: "]"))
            return days
        }

        /// The body again with `daily` holding `days` and, unless kept, no `current`.
        func joined(days: ArraySlice<Day>, keepingCurrent: Bool) -> [UInt8] {
            var out: [UInt8] = [UInt8(ascii: "{")]
            out.reserveCapacity(bytes.count)
            var first = true
            for member in members where keepingCurrent || member.name != "current" {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                if member.name == "daily" {
                    out.append(contentsOf: "\"daily\":[".utf8)
                    for (n, day) in days.enumerated() {
                        if n > 0 { out.append(UInt8(ascii: ",")) }
                        out.append(contentsOf: bytes[day.text])
                    }
                    out.append(UInt8(ascii: "]"))
                } else {
                    out.append(contentsOf: bytes[member.text])
                }
            }
            out.append(UInt8(ascii: "}"))
            return out
        }
    }
}
