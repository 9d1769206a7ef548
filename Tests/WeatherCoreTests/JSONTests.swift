import Foundation
import Testing
@testable import WeatherCore

@Suite struct JSONValueTests {
    func parse(_ text: String, maxDepth: Int = JSONValue.defaultMaxDepth) throws(JSONScanner.Invalid) -> JSONValue {
        try JSONValue.parse(Array(text.utf8), maxDepth: maxDepth)
    }

    @Test func documentsBecomeTrees() throws {
        #expect(
            try parse(#" {"a": [1, -2.5e3, true, false, null, "x\u00e9\ud83d\ude00\n"], "b": {}} "#)
                == .object([
                    .init("a", .array([.number(1), .number(-2500), .bool(true), .bool(false), .null, .string("xé😀\n")])),
                    .init("b", .object([])),
                ]))
        #expect(try parse("[]") == .array([]))
        #expect(try parse("\"\"") == .string(""))
        #expect(try parse("-0") == .number(-0.0))
        #expect(try parse("0.5E+1") == .number(5))
        #expect(try parse("0e-400") == .number(0))
        #expect(try parse("1e-320") == .number(1e-320))
    }

    @Test func theFirstOfTwoMembersOfOneNameIsTheOneFound() throws {
        let v = try parse(#"{"a": 1, "a": 2}"#)
        #expect(v["a"] == .number(1))
        #expect(v["b"] == nil)
        #expect(JSONValue.number(1)["a"] == nil)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "[1 2]", "01", "+1", ".5", "1.", "1e", "-",
        "1e400", "-1e400", "1e-400", "0.0001e-330", "tru", "nul", "\"\\x\"", "\"\\ud800\"", "\"\\udc00\"", "\"a\nb\"", "\"\\u12\"", "[1] x", "{} {}",
        "NaN", "Infinity", "'a'",
    ])
    func invalidDocumentsAreRefused(_ text: String) {
        #expect(throws: JSONScanner.Invalid.self) { try parse(text) }
    }

    @Test func invalidUTF8IsRefused() {
        #expect(throws: JSONScanner.Invalid.self) { try JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONScanner.Invalid.self) { try JSONValue.parse([0x22, 0xFF, 0x22]) }
    }

    @Test func nestingStopsAtTheLimit() throws {
        let ok = String(repeating: "[", count: 8) + String(repeating: "]", count: 8)
        #expect(try parse(ok, maxDepth: 8) != .null)
        let deep = String(repeating: "[", count: 9) + String(repeating: "]", count: 9)
        #expect(throws: JSONScanner.Invalid.self) { try parse(deep, maxDepth: 8) }
        #expect(throws: JSONScanner.Invalid.self) { try parse(String(repeating: "[", count: 100_000)) }
    }

    /// Whatever this parser accepts, Foundation's parser accepts with the same numbers and strings.
    @Test func acceptedDocumentsReadTheSameWithFoundation() throws {
        let documents = [
            #"{"temperature": 12.3, "n": [1, 2.50, -0.001, 1e21, 123456789012345678], "s": "a\/b\u0041\"", "z": null}"#,
            #"[{"a": {"b": {"c": [true, false]}}}]"#,
            #"{"unicode": "\u4e2d\u6587 ✓", "e": 1E-7}"#,
            // A zero with an exponent (RFC 8259 allows it; JSONDecoder refuses `0e9` and `0E9`,
            // found by the fuzz target, which now asks JSONSerialization in that case).
            #"[0E9, 0e9, -0e5, 0E+1, 0.0e400]"#,
        ]
        for text in documents {
            let mine = try parse(text)
            let theirs = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
            #expect(Self.same(mine, theirs), "\(text)")
        }
    }

    static func same(_ v: JSONValue, _ f: Any) -> Bool {
        switch v {
        case .null: return f is NSNull
        case .bool(let b): return (f as? Bool) == b
        case .number(let d): return (f as? NSNumber)?.doubleValue == d
        case .string(let s): return (f as? String) == s
        case .array(let a):
            guard let fa = f as? [Any], fa.count == a.count else { return false }
            return zip(a, fa).allSatisfy { same($0, $1) }
        case .object(let members):
            guard let fo = f as? [String: Any], fo.count == members.count else { return false }
            return members.allSatisfy { m in fo[m.key].map { same(m.value, $0) } ?? false }
        }
    }
}

@Suite struct WeatherReportJSONTests {
    func report(current: CurrentWeather?, values: [Double?]) -> WeatherReport {
        let conditions = WeatherCondition.allCases
        let daily = (0..<values.count).map { i in
            DailyWeather(
                date: "2026-12-\(10 + i)", temperatureMinC: values[i], temperatureMaxC: values[(i + 1) % values.count],
                condition: conditions[i % conditions.count], precipitationProbability: values[(i + 2) % values.count])
        }
        return WeatherReport(
            provider: "caiyun", location: GridPoint(lat: 31.25, lon: -121.45), timezone: "Asia/Shanghai",
            current: current, daily: daily, fetchedAt: "2026-11-30T02:03:11Z")
    }

    struct One: Codable { var v: Double? }

    /// Numbers are written as `JSONEncoder` wrote them (old cached bodies and new ones read alike).
    @Test(arguments: [
        12.3, 0, 5, -1.5, 0.1, 0.62, 100, 1e-7, 2.5e-5, 1e15, 1e16, 1e21, 123456789.125, 0.30000000000000004, -273.15, 5e-324, 1.7976931348623157e308,
    ])
    func numbersAreWrittenAsJSONEncoderWroteThem(_ v: Double) throws {
        var w = JSONWriter()
        w.object { w in w.field("v", v) }
        #expect(String(decoding: w.bytes, as: UTF8.self) == String(decoding: try JSONEncoder().encode(One(v: v)), as: UTF8.self))
    }

    /// Negative zero (a provider's `-0.0`) is written as `0`, where `JSONEncoder` wrote `-0`.
    @Test func negativeZeroIsWrittenAsZero() {
        var w = JSONWriter()
        w.object { w in
            w.field("a", -0.0)
            w.field("b", Double?(-0.0))
            w.field("c", -1e-300 * 1e-300)
        }
        #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"a":0,"b":0,"c":0}"#)
    }

    /// The fields come in the declared order (`JSONEncoder` on Linux wrote them in hash order),
    /// and the body decodes back to the same report.
    @Test func theBodyHasTheDeclaredFieldOrderAndDecodesBack() throws {
        let values: [Double?] = [12.3, nil, -0.0, 5, 0.62, 1e-7, 1e21]
        let current = CurrentWeather(
            observedAt: "2026-11-30T02:00:00Z", temperatureC: 12.3, apparentTemperatureC: nil, humidity: 0.62,
            windSpeedKph: 9.4, precipitationMmPerHour: 0, condition: .partlyCloudy)
        let forecast = report(current: current, values: values)
        #expect(
            String(decoding: forecast.json, as: UTF8.self).hasPrefix(
                #"{"provider":"caiyun","location":{"lat":31.25,"lon":-121.45},"timezone":"Asia/Shanghai","current":{"observedAt":"2026-11-30T02:00:00Z","temperatureC":12.3,"apparentTemperatureC":null,"humidity":0.62,"windSpeedKph":9.4,"precipitationMmPerHour":0,"condition":"partly_cloudy"},"daily":[{"date":"2026-12-10","temperatureMinC":12.3,"temperatureMaxC":null,"condition":"clear","precipitationProbability":0},"#
            ))
        let trip = report(current: nil, values: [])
        #expect(
            String(decoding: trip.json, as: UTF8.self)
                == #"{"provider":"caiyun","location":{"lat":31.25,"lon":-121.45},"timezone":"Asia/Shanghai","daily":[],"fetchedAt":"2026-11-30T02:03:11Z"}"#)
        for r in [forecast, trip, report(current: nil, values: values)] {
            #expect(try JSONDecoder().decode(WeatherReport.self, from: Data(r.json)) == r)
        }
    }

    /// Strings are escaped where JSON needs it, anywhere in the string, and everything else is
    /// copied as it is: each decodes back to itself.
    @Test(arguments: ["", "plain", "\"", "a\"b\\c", "\\end\"", "tab\there\nnew\u{1}\u{1f}", "\u{0}", "héllo ☂︎ 雨", "\u{7f}/</script>"])
    func stringsAreEscapedAndDecodeBack(_ text: String) throws {
        var w = JSONWriter()
        w.object { w in w.field("s", text) }
        let decoded = try JSONSerialization.jsonObject(with: Data(w.bytes)) as? [String: String]
        #expect(decoded == ["s": text])
        #expect(!w.bytes.contains { $0 < 0x20 })
    }

    @Test func aNumberThatIsNotFiniteIsWrittenAsNull() throws {
        let r = report(current: nil, values: [.infinity, .nan])
        let text = String(decoding: r.json, as: UTF8.self)
        #expect(text.contains(#""temperatureMinC":null,"temperatureMaxC":null"#))
        #expect(try JSONSerialization.jsonObject(with: Data(r.json)) is [String: Any])
    }
}

/// `ReportSlice` cuts a stored outlook into each answer byte for byte as `WeatherReport.json`
/// would have written that answer.
@Suite struct ReportSliceTests {
    func outlook(days: Int, timezone: String = "Asia/Shanghai") -> WeatherReport {
        let start = LocalDate("2026-11-30")!
        let daily = (0..<days).map { i in
            DailyWeather(
                date: start.adding(days: i).description, temperatureMinC: Double(i) - 0.5, temperatureMaxC: i % 3 == 0 ? nil : 1e-7,
                condition: WeatherCondition.allCases[i % WeatherCondition.allCases.count], precipitationProbability: 0.1)
        }
        let current = CurrentWeather(
            observedAt: nil, temperatureC: 12.3, apparentTemperatureC: nil, humidity: 0.62,
            windSpeedKph: 9.4, precipitationMmPerHour: 0, condition: .cloudy)
        return WeatherReport(
            provider: "caiyun", location: GridPoint(lat: 31.25, lon: -121.45), timezone: timezone,
            current: current, daily: daily, fetchedAt: "2026-11-30T02:03:11Z")
    }

    @Test(arguments: ["Asia/Shanghai", #"x","daily":[{"date":"2026-11-30"}],"y":"\"#, "雨 ☂︎"])
    func aForecastIsTheOutlooksFirstDays(timezone: String) throws {
        let full = outlook(days: 15, timezone: timezone)
        for n in 1...15 {
            var expected = full
            expected.daily = Array(full.daily.prefix(n))
            #expect(ReportSlice.forecast(full.json, days: n) == expected.json, "days=\(n)")
        }
        #expect(ReportSlice.forecast(full.json, days: 16) == nil)
        #expect(ReportSlice.forecast(full.json, days: 0) == nil)
    }

    /// A stale copy after its place's midnight: the ended days dropped byte for byte as
    /// `WeatherReport.json` would have written the rest; a forecast cut from what is left only
    /// when it holds every day asked.
    @Test func aStaleCopyLosesItsEndedDays() throws {
        let full = outlook(days: 15)
        for ended in [1, 2, 14] {
            var expected = full
            expected.daily = Array(full.daily.dropFirst(ended))
            #expect(ReportSlice.dropping(days: ended, from: full.json) == expected.json, "ended=\(ended)")
        }
        #expect(ReportSlice.dropping(days: 0, from: full.json) == full.json)
        #expect(ReportSlice.dropping(days: 15, from: full.json) == nil, "no day left")
        #expect(ReportSlice.dropping(days: 1, from: Array("{}".utf8)) == nil)

        let left = try #require(ReportSlice.dropping(days: 1, from: full.json))
        #expect(ReportSlice.forecast(left, days: 14) == left)
        #expect(ReportSlice.forecast(left, days: 15) == nil, "14 days left do not answer days=15")
        var seven = full
        seven.daily = Array(full.daily[1..<8])
        #expect(ReportSlice.forecast(left, days: 7) == seven.json)
    }

    @Test func aTripIsItsDatesWithoutCurrent() throws {
        let full = outlook(days: 15)
        let first = LocalDate("2026-11-30")!
        for (from, count) in [(0, 1), (0, 15), (3, 4), (14, 1), (10, 5)] {
            var expected = full
            expected.current = nil
            expected.daily = Array(full.daily[from..<(from + count)])
            let cut = ReportSlice.trip(full.json, start: first.adding(days: from), end: first.adding(days: from + count - 1))
            #expect(cut == expected.json, "\(from)+\(count)")
        }
        // Dates the outlook does not hold, at either end.
        #expect(ReportSlice.trip(full.json, start: first.adding(days: -1), end: first) == nil)
        #expect(ReportSlice.trip(full.json, start: first.adding(days: 14), end: first.adding(days: 15)) == nil)
        // A gap in the outlook's dates.
        var gap = full
        gap.daily.remove(at: 5)
        #expect(ReportSlice.trip(gap.json, start: first.adding(days: 4), end: first.adding(days: 6)) == nil)
    }

    @Test(arguments: ["", "[]", "{}", #"{"daily":[{"date":"2026-11-30"}]"#, #"{"daily":{}}"#, "{\"daily\":[]} x"])
    func whatIsNotAStoredReportIsNotCut(_ text: String) {
        #expect(ReportSlice.forecast(Array(text.utf8), days: 1) == nil)
        #expect(ReportSlice.trip(Array(text.utf8), start: LocalDate("2026-11-30")!, end: LocalDate("2026-11-30")!) == nil)
    }
}
