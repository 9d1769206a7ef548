import Foundation
import Testing
import WeatherCore
import WeatherProviders

/// Clients must not care which provider answered: both normalise to the same JSON shape.
@Suite struct ShapeParityTests {
    /// The JSON value with every leaf replaced by its type name.
    static func shape(_ value: Any) -> String {
        switch value {
        case let dict as [String: Any]:
            return "{" + dict.keys.sorted().map { "\($0):\(shape(dict[$0]!))" }.joined(separator: ",") + "}"
        case let array as [Any]:
            return "[" + array.map(shape).joined(separator: ",") + "]"
        case is String: return "string"
        case is NSNull: return "null"
        default: return "number"
        }
    }

    static func json(_ report: WeatherReport) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as! [String: Any]
    }

    static func pair(_ query: WeatherQuery) throws -> (WeatherReport, WeatherReport) {
        let point = GridPoint(lat: 31.25, lon: 121.45)
        let caiyun = try CaiyunProvider.report(
            from: HTTPResult(status: 200, body: Fixture.bytes(Fixture.caiyunWeather)), for: query, at: point, now: fixtureNow)
        let vc = try VisualCrossingProvider.report(
            from: HTTPResult(status: 200, body: Fixture.bytes(Fixture.vcForecast)), for: query, at: point, now: fixtureNow)
        return (caiyun, vc)
    }

    @Test(arguments: [
        WeatherQuery.forecast(days: 7),
        WeatherQuery.forecast(days: 1),
        WeatherQuery.trip(start: LocalDate("2026-12-01")!, end: LocalDate("2026-12-04")!),
    ])
    func bothProvidersAnswerTheSameRequestInTheSameShape(query: WeatherQuery) throws {
        let (caiyun, vc) = try Self.pair(query)
        #expect(Self.shape(try Self.json(caiyun)) == Self.shape(try Self.json(vc)))
        #expect(caiyun.daily.map(\.date) == vc.daily.map(\.date))
        #expect(caiyun.location == vc.location)
        #expect(caiyun.fetchedAt == vc.fetchedAt)
        #expect((caiyun.current == nil) == (vc.current == nil))
        let keys = Set(try Self.json(caiyun).keys)
        if case .trip = query {
            #expect(keys == ["provider", "location", "timezone", "daily", "fetchedAt"])
        } else {
            #expect(keys == ["provider", "location", "timezone", "current", "daily", "fetchedAt"])
        }
    }
}
