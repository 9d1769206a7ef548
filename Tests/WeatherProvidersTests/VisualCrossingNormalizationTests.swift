import Foundation
import Testing
import WeatherCore
import WeatherProviders

let newYork = GridPoint(lat: 40.7, lon: -74)

@Suite struct VisualCrossingNormalizationTests {
    static let tripQuery = WeatherQuery.trip(start: LocalDate("2026-12-20")!, end: LocalDate("2026-12-24")!)

    func report(_ body: [UInt8], status: Int = 200, _ query: WeatherQuery = .forecast(days: 7)) throws(ProviderFailure) -> WeatherReport {
        try VisualCrossingProvider.report(from: HTTPResult(status: status, body: body), for: query, at: newYork, now: fixtureNow)
    }

    func modified(_ name: String = Fixture.vcForecast, _ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
        var object = try Fixture.object(name)
        change(&object)
        return try Fixture.encode(object)
    }

    /// The same bounds as Caiyun's: a humidity or probability beyond a percent is null, not
    /// clamped to 1; a day's minimum above its maximum makes both null; impossible current values
    /// are null; a gap in `days` is not skipped over (session 17).
    @Test func implausibleValuesAreNullAndAGapIsNotCovered() throws {
        let r = try report(
            modified { o in
                var current = o["currentConditions"] as! [String: Any]
                current["humidity"] = 150.0
                current["temp"] = 1e300
                current["windspeed"] = 9999.0
                current["precip"] = -2.0
                o["currentConditions"] = current
                var days = o["days"] as! [[String: Any]]
                days[0]["tempmin"] = 30.0
                days[0]["tempmax"] = -5.0
                days[1]["precipprob"] = 250.0
                o["days"] = days
            })
        let c = try #require(r.current)
        #expect(c.humidity == nil && c.temperatureC == nil && c.windSpeedKph == nil && c.precipitationMmPerHour == nil)
        #expect(r.daily[0].temperatureMinC == nil && r.daily[0].temperatureMaxC == nil)
        #expect(r.daily[1].precipitationProbability == nil)

        let gap = try modified { o in
            var days = o["days"] as! [[String: Any]]
            days.remove(at: 3)
            o["days"] = days
        }
        #expect(throws: ProviderFailure.notCovered) { try report(gap, .forecast(days: 5)) }
        #expect(try report(gap, .forecast(days: 3)).daily.count == 3)
    }

    @Test func forecastFixtureNormalisesFieldByField() throws {
        let r = try report(Fixture.bytes(Fixture.vcForecast))
        #expect(r.provider == "visualcrossing")
        #expect(r.location == newYork)
        #expect(r.timezone == "America/New_York")
        #expect(r.fetchedAt == "2026-11-30T02:03:11Z")
        let c = try #require(r.current)
        #expect(c.observedAt == "2026-11-30T02:00:00Z")
        #expect(c.temperatureC == 6.8)
        #expect(c.apparentTemperatureC == 4.1)
        #expect(c.humidity == 0.725)  // percent → fraction
        #expect(c.windSpeedKph == 13.0)
        #expect(c.precipitationMmPerHour == 0.0)
        #expect(c.condition == .partlyCloudy)

        #expect(
            r.daily.map(\.date) == [
                "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05", "2026-12-06",
            ])
        #expect(r.daily.map(\.temperatureMinC) == [3.9, 4.2, 2.5, 1.1, 0.4, 2.0, -3.4])
        #expect(r.daily.map(\.temperatureMaxC) == [11.4, 9.0, 7.7, 6.2, 10.1, 8.8, 1.2])
        #expect(r.daily.map(\.condition) == [.partlyCloudy, .cloudy, .rain, .rain, .clear, .fog, .snow])
        #expect(r.daily.map(\.precipitationProbability) == [0.065, 0.323, 0.9, 1.0, 0.0, 0.032, 0.645])
    }

    /// On the day the clocks go back, an answer whose top-level `tzoffset` is the day's first
    /// offset (+2 in Paris on 31 October) put 23:30 local (+1) into 1 November and left today
    /// out; the days' own midnights (`datetimeEpoch`) say which day holds now and when it ends.
    @Test func todayIsTheDayWhoseMidnightsHoldNow() throws {
        let midnights = [
            "2027-10-30": "2027-10-29T22:00:00Z", "2027-10-31": "2027-10-30T22:00:00Z",
            "2027-11-01": "2027-10-31T23:00:00Z", "2027-11-02": "2027-11-01T23:00:00Z",
        ]
        let body = try modified { o in
            o["timezone"] = "Europe/Paris"
            o["tzoffset"] = 2.0
            var days = o["days"] as! [[String: Any]]
            days = Array(days.prefix(4))
            for (i, date) in midnights.keys.sorted().enumerated() {
                days[i]["datetime"] = date
                days[i]["datetimeEpoch"] = Double(Timestamp(iso8601: midnights[date]!)!.seconds)
            }
            o["days"] = days
        }
        let now = Timestamp(iso8601: "2027-10-31T22:30:00Z")!  // 23:30 in Paris, now at +1
        let r = try VisualCrossingProvider.report(from: HTTPResult(status: 200, body: body), for: .forecast(days: 2), at: newYork, now: now)
        #expect(r.daily.map(\.date) == ["2027-10-31", "2027-11-01"])
        #expect(r.todayEndsAt == Timestamp(iso8601: "2027-10-31T23:00:00Z")!.seconds)
        // Without the days' midnights, the top-level offset as before.
        let bare = try modified { o in
            o["tzoffset"] = 2.0
            o["days"] = (o["days"] as! [[String: Any]]).map {
                var d = $0; d["datetimeEpoch"] = nil; return d
            }
        }
        #expect(
            try VisualCrossingProvider.report(from: HTTPResult(status: 200, body: bare), for: .forecast(days: 2), at: newYork, now: fixtureNow).todayEndsAt
                == Timestamp(iso8601: "2026-11-30T22:00:00Z")!.seconds)
    }

    @Test func forecastIsTrimmedAndShortAnswersAreNotCovered() throws {
        #expect(try report(Fixture.bytes(Fixture.vcForecast), .forecast(days: 2)).daily.map(\.date) == ["2026-11-30", "2026-12-01"])
        #expect(throws: ProviderFailure.notCovered) { try report(Fixture.bytes(Fixture.vcForecast), .forecast(days: 15)) }
    }

    @Test func tripFixtureHasNoCurrentAndKeepsNullProbability() throws {
        let r = try report(Fixture.bytes(Fixture.vcTrip), Self.tripQuery)
        #expect(r.current == nil)
        #expect(r.daily.map(\.date) == ["2026-12-20", "2026-12-21", "2026-12-22", "2026-12-23", "2026-12-24"])
        #expect(r.daily.map(\.precipitationProbability) == [0.065, 0.323, 0.9, 1.0, nil])
        #expect(r.daily[4].condition == .clear)
        let json = String(decoding: try JSONEncoder().encode(r), as: UTF8.self)
        #expect(json.contains("\"precipitationProbability\":null"))
        #expect(!json.contains("\"current\""))
    }

    @Test func tripMustCoverEveryAskedDay() throws {
        let longer = WeatherQuery.trip(start: LocalDate("2026-12-19")!, end: LocalDate("2026-12-24")!)
        #expect(throws: ProviderFailure.notCovered) { try report(Fixture.bytes(Fixture.vcTrip), longer) }
        let inner = WeatherQuery.trip(start: LocalDate("2026-12-21")!, end: LocalDate("2026-12-22")!)
        #expect(try report(Fixture.bytes(Fixture.vcTrip), inner).daily.map(\.date) == ["2026-12-21", "2026-12-22"])
    }

    /// An answer without `currentConditions` read as a forecast keeps its days, with `current`
    /// all null (it failed the whole answer: a 502 with only one provider).
    @Test func forecastWithoutCurrentConditionsHasANullCurrent() throws {
        let r = try report(Fixture.bytes(Fixture.vcTrip), .forecast(days: 5))
        #expect(r.current == .unknown && r.daily.count == 5)
    }

    @Test func integersWhereTheFixtureHasDecimalsAreAccepted() throws {
        let body = try Fixture.encode(Fixture.integers(Fixture.object(Fixture.vcForecast)))
        let r = try report(body)
        #expect(r.current?.temperatureC == 7)
        #expect(r.current?.humidity == 0.73)  // 72.5 → 73 percent
        #expect(r.daily[1].precipitationProbability == 0.32)
        #expect(r.daily[6].temperatureMinC == -3)
    }

    /// `datetimeEpoch` out of the wire format's range (see the Caiyun test of `server_time`).
    @Test(arguments: [1e300, -1e300, 9.3e18, 1e16, -1e18, -1, 253_402_300_800])
    func observationTimeOutsideTheWireFormatIsNull(value: Double) throws {
        let r = try report(
            modified { o in
                var current = o["currentConditions"] as! [String: Any]
                current["datetimeEpoch"] = value
                o["currentConditions"] = current
            })
        let c = try #require(r.current)
        #expect(c.observedAt == nil)
    }

    @Test func missingOptionalFieldsBecomeNullNotInvented() throws {
        let body = try modified { o in
            var current = o["currentConditions"] as! [String: Any]
            current["feelslike"] = nil
            current["precip"] = nil
            current["datetimeEpoch"] = nil
            current["icon"] = nil
            o["currentConditions"] = current
            var days = o["days"] as! [[String: Any]]
            days[1]["precipprob"] = nil
            days[2]["tempmin"] = NSNull()
            days[3]["icon"] = nil
            o["days"] = days
        }
        let r = try report(body)
        let c = try #require(r.current)
        #expect(c.apparentTemperatureC == nil)
        #expect(c.precipitationMmPerHour == nil)
        #expect(c.observedAt == nil)
        #expect(c.condition == .unknown)
        #expect(c.temperatureC == 6.8)
        #expect(r.daily[1].precipitationProbability == nil)
        #expect(r.daily[2].temperatureMinC == nil)
        #expect(r.daily[3].condition == .unknown)
    }

    @Test func unknownExtraFieldsAreIgnored() throws {
        let plain = try report(Fixture.bytes(Fixture.vcForecast))
        let extra = try report(Fixture.encode(Fixture.withExtraFields(Fixture.object(Fixture.vcForecast))))
        #expect(extra == plain)
    }

    @Test func fieldsOfTheWrongTypeMakeTheAnswerUnparseable() throws {
        func day0(_ change: @escaping (inout [String: Any]) -> Void) throws -> [UInt8] {
            try modified { o in
                var days = o["days"] as! [[String: Any]]
                change(&days[0])
                o["days"] = days
            }
        }
        #expect(throws: ProviderFailure.unparseable) { try report(day0 { $0["tempmax"] = true }) }
        #expect(throws: ProviderFailure.unparseable) { try report(day0 { $0["datetime"] = nil }) }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["days"] = ["2026-11-30"] }) }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["currentConditions"] = [1] }) }
        #expect(throws: ProviderFailure.unparseable) { try report(Array(#"{"errorCode": 5.5, "message": "x"}"#.utf8)) }
        #expect(throws: ProviderFailure.providerError) { try report(Array(#"{"errorCode": 5.0}"#.utf8)) }
        #expect(try report(day0 { $0["tempmax"] = NSNull() }).daily[0].temperatureMaxC == nil)
        // A forecast without current conditions keeps its days, with a current block of nulls
        // (it was a failure of the whole answer).
        let noCurrent = try report(modified { $0["currentConditions"] = nil })
        #expect(noCurrent.current == .unknown && noCurrent.daily.count == 7)
    }

    @Test func errorAnswersAreClassified() throws {
        let text = Array("Bad API Request:Invalid location parameter value.".utf8)
        #expect(throws: ProviderFailure.httpStatus(400, retryAfter: nil)) { try report(text, status: 400) }
        #expect(throws: ProviderFailure.httpStatus(401, retryAfter: nil)) { try report(text, status: 401) }
        // Plain text with a 200 is not an answer we can read, nor one any query should get.
        #expect(throws: ProviderFailure.notJSON) { try report(text) }
        #expect(throws: ProviderFailure.providerError) {
            try report(Array(#"{"errorCode": 999, "message": "Internal error"}"#.utf8))
        }
        #expect(throws: ProviderFailure.unparseable) { try report(Array(#"{"queryCost": 1}"#.utf8)) }
        #expect(throws: ProviderFailure.notJSON) { try report(Array("<html>oops</html>".utf8)) }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["timezone"] = nil }) }
        #expect(throws: ProviderFailure.unparseable) {
            try report(
                modified { o in
                    var days = o["days"] as! [[String: Any]]
                    days[0]["datetime"] = "30/11/2026"
                    o["days"] = days
                })
        }
    }
}
