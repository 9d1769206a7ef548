import Foundation
import Testing
import WeatherCore
import WeatherProviders

/// 2026-11-30T02:03:11Z, three minutes after the fixtures' `server_time`.
let fixtureNow = Timestamp(seconds: 1_796_004_191)
/// Deliberately not the fixture's echoed `location`, to prove the report never uses the echo.
let shanghai = GridPoint(lat: 31.3, lon: 121.5)

@Suite struct CaiyunNormalizationTests {
    func report(_ body: [UInt8], status: Int = 200, _ query: WeatherQuery = .forecast(days: 7)) throws(ProviderFailure) -> WeatherReport {
        try CaiyunProvider.report(from: HTTPResult(status: status, body: body), for: query, at: shanghai, now: fixtureNow)
    }

    func modified(_ change: (inout [String: Any]) -> Void) throws -> [UInt8] {
        var object = try Fixture.object(Fixture.caiyunWeather)
        change(&object)
        return try Fixture.encode(object)
    }

    /// The report says when the place's today ends (its next midnight, from `tzshift`), so the
    /// cache keeps a forecast fresh no longer; not part of the JSON. No offset, no end.
    @Test func theReportSaysWhenThePlacesTodayEnds() throws {
        let r = try report(Fixture.bytes(Fixture.caiyunWeather))
        #expect(r.todayEndsAt == Timestamp(iso8601: "2026-11-30T16:00:00Z")!.seconds)  // 00:00 in Shanghai, UTC+8
        #expect(!String(decoding: r.json, as: UTF8.self).contains("todayEndsAt"))
        let vc = try VisualCrossingProvider.report(
            from: HTTPResult(status: 200, body: Fixture.bytes(Fixture.vcForecast)), for: .forecast(days: 7), at: newYork, now: fixtureNow)
        #expect(vc.todayEndsAt == Timestamp(iso8601: "2026-11-30T05:00:00Z")!.seconds)  // 00:00 in New York, UTC-5
        let noShift = try report(modified { $0["tzshift"] = nil })
        #expect(noShift.todayEndsAt == nil)
        #expect(!r.dayNotTurned && !noShift.dayNotTurned)
        // Shanghai's series starts at its today, which the first day ends with (the cache keeps
        // this with the row); New York's, at 21:03 on 29 November there, starts at its tomorrow.
        #expect(r.daily.first?.date == "2026-11-30" && r.firstDayEndsAt == r.todayEndsAt && noShift.firstDayEndsAt == nil)
        #expect(vc.daily.first?.date == "2026-11-30" && vc.firstDayEndsAt == Timestamp(iso8601: "2026-12-01T05:00:00Z")!.seconds)
    }

    /// Half a minute after Shanghai's midnight the same series (from 30 November) is a provider
    /// whose day has not turned: a forecast answered from yesterday, or an outlook one day short,
    /// says so (the cache keeps it a minute); a trip never does.
    @Test func aSeriesFromYesterdayJustAfterMidnightSaysTheDayHasNotTurned() throws {
        let justAfter = Timestamp(iso8601: "2026-11-30T16:00:30Z")!
        func at(_ query: WeatherQuery) throws -> WeatherReport {
            try CaiyunProvider.report(from: HTTPResult(status: 200, body: Fixture.bytes(Fixture.caiyunWeather)), for: query, at: shanghai, now: justAfter)
        }
        let forecast = try at(.forecast(days: 7))
        #expect(forecast.daily.first?.date == "2026-11-30" && forecast.dayNotTurned)
        // Its first day is yesterday, which ended at Shanghai's midnight half a minute ago.
        #expect(forecast.firstDayEndsAt == Timestamp(iso8601: "2026-11-30T16:00:00Z")!.seconds)
        #expect(forecast.todayEndsAt == Timestamp(iso8601: "2026-12-01T16:00:00Z")!.seconds)
        let outlook = try at(.outlook)
        #expect(outlook.daily.first?.date == "2026-12-01" && outlook.daily.count == 6 && outlook.dayNotTurned)
        #expect(outlook.firstDayEndsAt == outlook.todayEndsAt, "an outlook short of yesterday starts at today")
        #expect(try !at(.forecast(days: 3)).dayNotTurned, "three days from today are all there")
        #expect(try !at(.trip(start: LocalDate("2026-12-01")!, end: LocalDate("2026-12-02")!)).dayNotTurned)
        // At noon the same series is a provider quirk, not a day about to turn: the usual TTL.
        let noon = try CaiyunProvider.report(
            from: HTTPResult(status: 200, body: Fixture.bytes(Fixture.caiyunWeather)), for: .forecast(days: 7),
            at: shanghai, now: Timestamp(iso8601: "2026-12-01T04:00:00Z")!)
        #expect(noon.daily.first?.date == "2026-11-30" && !noon.dayNotTurned)
    }

    /// Values no place has, or in the wrong unit, are the provider's error: null, not passed on
    /// (1000 °C, a negative wind) nor clamped into a confident fraction (humidity 62 → 1). A
    /// day's minimum above its maximum makes both null; an observation time of 1970 or a year
    /// ahead is null (found by a black-box run of odd provider payloads, session 17).
    @Test func implausibleValuesAreNull() throws {
        let r = try report(
            modified { o in
                var result = o["result"] as! [String: Any]
                var realtime = result["realtime"] as! [String: Any]
                realtime["temperature"] = 1000.0
                realtime["apparent_temperature"] = -300.0  // a felt 75 °C is kept: below
                realtime["humidity"] = 62.0
                realtime["wind"] = ["speed": -5.0, "direction": 76.0]
                realtime["precipitation"] = ["local": ["status": "ok", "intensity": -1.0]]
                result["realtime"] = realtime
                var daily = result["daily"] as! [String: Any]
                var temperature = daily["temperature"] as! [[String: Any]]
                temperature[0]["min"] = 20.0
                temperature[0]["max"] = 5.0
                temperature[1]["max"] = 200.0
                daily["temperature"] = temperature
                var precipitation = daily["precipitation"] as! [[String: Any]]
                precipitation[0]["probability"] = 150.0
                precipitation[1]["probability"] = 100.4  // provider rounding: still 1
                daily["precipitation"] = precipitation
                result["daily"] = daily
                o["result"] = result
                o["server_time"] = 0.0
            })
        let c = try #require(r.current)
        #expect(c.temperatureC == nil && c.apparentTemperatureC == nil && c.humidity == nil)
        #expect(c.windSpeedKph == nil && c.precipitationMmPerHour == nil && c.observedAt == nil)
        #expect(r.daily[0].temperatureMinC == nil && r.daily[0].temperatureMaxC == nil, "min above max")
        #expect(r.daily[1].temperatureMinC == 7.4 && r.daily[1].temperatureMaxC == nil)
        #expect(r.daily[0].precipitationProbability == nil && r.daily[1].precipitationProbability == 1)
        let ahead = try report(modified { $0["server_time"] = Double(fixtureNow.seconds + 365 * 86_400) })
        #expect(ahead.current?.observedAt == nil)
        let hot = try report(
            modified { o in
                var result = o["result"] as! [String: Any]
                var realtime = result["realtime"] as! [String: Any]
                realtime["temperature"] = 49.0
                realtime["apparent_temperature"] = 75.0  // a heat index of that order has been recorded
                result["realtime"] = realtime
                o["result"] = result
            })
        #expect(hot.current?.temperatureC == 49 && hot.current?.apparentTemperatureC == 75)
    }

    /// `daily` covers exactly the days asked: a day missing from every series is not skipped
    /// over (the next provider is asked), and a stray entry for the place's yesterday (by
    /// `tzshift`) is left out, where it became `daily[0]` and pushed the last day out.
    @Test func aSkippedDayIsNotCoveredAndYesterdayIsLeftOut() throws {
        let gap = try modified { o in
            var result = o["result"] as! [String: Any]
            var daily = result["daily"] as! [String: Any]
            for series in ["temperature", "skycon", "precipitation"] {
                var entries = daily[series] as! [[String: Any]]
                entries.remove(at: 2)
                daily[series] = entries
            }
            result["daily"] = daily
            o["result"] = result
        }
        #expect(throws: ProviderFailure.notCovered) { try report(gap, .forecast(days: 5)) }
        #expect(try report(gap, .forecast(days: 2)).daily.map(\.date) == ["2026-11-30", "2026-12-01"])
        #expect(try report(gap, .outlook).daily.map(\.date) == ["2026-11-30", "2026-12-01"])

        let yesterday = try modified { o in
            var result = o["result"] as! [String: Any]
            var daily = result["daily"] as! [String: Any]
            var precipitation = daily["precipitation"] as! [[String: Any]]
            precipitation.insert(["date": "2026-11-29T00:00+08:00", "max": 0.0, "min": 0.0, "avg": 0.0, "probability": 10], at: 0)
            daily["precipitation"] = precipitation
            result["daily"] = daily
            o["result"] = result
        }
        #expect(try report(yesterday, .forecast(days: 3)).daily.map(\.date) == ["2026-11-30", "2026-12-01", "2026-12-02"])

        // Just after the place's midnight a series may still start at yesterday, with exactly the
        // days asked: taken from its first day, not refused (Caiyun alone would answer 502).
        let late = try modified { o in
            var result = o["result"] as! [String: Any]
            var daily = result["daily"] as! [String: Any]
            for series in ["temperature", "skycon", "precipitation"] {
                var entries = daily[series] as! [[String: Any]]
                var first = entries[0]
                first["date"] = "2026-11-29T00:00+08:00"
                entries.insert(first, at: 0)
                entries.removeLast(entries.count - 3)
                daily[series] = entries
            }
            result["daily"] = daily
            o["result"] = result
        }
        #expect(try report(late, .forecast(days: 3)).daily.map(\.date) == ["2026-11-29", "2026-11-30", "2026-12-01"])
        #expect(try report(late, .forecast(days: 2)).daily.map(\.date) == ["2026-11-30", "2026-12-01"])
        // Only such a series: one that starts earlier, or skips a day after today, is not covered.
        let older = try modified { o in
            var result = o["result"] as! [String: Any]
            var daily = result["daily"] as! [String: Any]
            for series in ["temperature", "skycon", "precipitation"] {
                let entries = daily[series] as! [[String: Any]]
                daily[series] = ["2026-11-27", "2026-11-28", "2026-11-29", "2026-11-30"].enumerated().map { i, date in
                    var e = entries[i]
                    e["date"] = "\(date)T00:00+08:00"
                    return e
                }
            }
            result["daily"] = daily
            o["result"] = result
        }
        #expect(throws: ProviderFailure.notCovered) { try report(older, .forecast(days: 3)) }
    }

    /// A time zone no app's `TimeZone(identifier:)` knows (empty, another script, control
    /// bytes) makes the answer unusable, as a missing one does: the next provider is asked.
    @Test(arguments: ["", "亚洲/上海", "Mars/Olympus\u{0}\"x", "/Asia", String(repeating: "A", count: 65)])
    func aTimeZoneNoClientKnowsIsUnparseable(name: String) throws {
        let body = try modified { $0["timezone"] = name }
        #expect(throws: ProviderFailure.unparseable) { try report(body) }
        for good in ["Asia/Shanghai", "America/Argentina/Buenos_Aires", "Etc/GMT+8", "UTC"] {
            #expect(try report(modified { $0["timezone"] = good }).timezone == good)
        }
    }

    /// The answer's `unit` echo must be the system asked for; without the echo the request's
    /// `unit=metric:v2` is trusted (Caiyun documents the echo but an older answer may lack it).
    @Test func anAnswerInAnotherUnitSystemIsUnparseable() throws {
        for unit in ["imperial", "metric", "metric:v1", "SI"] {
            let body = try modified { $0["unit"] = unit }
            #expect(throws: ProviderFailure.unparseable, "unit \(unit)") { try report(body) }
        }
        #expect(try report(modified { $0["unit"] = nil }).daily.count == 7)
        #expect(try report(modified { $0["unit"] = CaiyunProvider.unitSystem }).daily.count == 7)
    }

    @Test func forecastFixtureNormalisesFieldByField() throws {
        let r = try report(Fixture.bytes(Fixture.caiyunWeather))
        #expect(r.provider == "caiyun")
        #expect(r.location == shanghai)
        #expect(r.timezone == "Asia/Shanghai")
        #expect(r.fetchedAt == "2026-11-30T02:03:11Z")
        let c = try #require(r.current)
        #expect(c.observedAt == "2026-11-30T02:00:00Z")
        #expect(c.temperatureC == 12.3)
        #expect(c.apparentTemperatureC == 10.1)
        #expect(c.humidity == 0.62)
        #expect(c.windSpeedKph == 9.4)
        #expect(c.precipitationMmPerHour == 0.0)
        #expect(c.condition == .cloudy)

        #expect(
            r.daily.map(\.date) == [
                "2026-11-30", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05", "2026-12-06",
            ])
        #expect(r.daily.map(\.temperatureMinC) == [8.0, 7.4, 5.0, 2.6, 1.9, 4.4, -1.5])
        #expect(r.daily.map(\.temperatureMaxC) == [14.5, 12.0, 9.8, 7.1, 11.3, 12.9, 3.2])
        #expect(r.daily.map(\.condition) == [.partlyCloudy, .cloudy, .rain, .rain, .clear, .haze, .snow])
        // Caiyun sends percent; the API speaks fractions.
        #expect(r.daily.map(\.precipitationProbability) == [0.1, 0.25, 0.8, 0.95, 0.0, 0.05, 0.6])
    }

    @Test func forecastIsTrimmedToTheDaysAsked() throws {
        let r = try report(Fixture.bytes(Fixture.caiyunWeather), .forecast(days: 3))
        #expect(r.daily.map(\.date) == ["2026-11-30", "2026-12-01", "2026-12-02"])
        #expect(r.current != nil)
    }

    @Test func forecastWithFewerDaysThanAskedIsNotCovered() throws {
        #expect(throws: ProviderFailure.notCovered) { try report(Fixture.bytes(Fixture.caiyunWeather), .forecast(days: 8)) }
    }

    @Test func tripKeepsExactlyTheAskedLocalDatesWithoutCurrent() throws {
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-02")!, end: LocalDate("2026-12-04")!)
        let r = try report(Fixture.bytes(Fixture.caiyunWeather), trip)
        #expect(r.current == nil)
        #expect(r.daily.map(\.date) == ["2026-12-02", "2026-12-03", "2026-12-04"])
        #expect(r.daily.map(\.precipitationProbability) == [0.8, 0.95, 0.0])
    }

    @Test func tripWithADayMissingFromTheAnswerIsNotCovered() throws {
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-05")!, end: LocalDate("2026-12-07")!)
        #expect(throws: ProviderFailure.notCovered) { try report(Fixture.bytes(Fixture.caiyunWeather), trip) }
    }

    @Test func integersWhereTheFixtureHasDecimalsAreAccepted() throws {
        let body = try Fixture.encode(Fixture.integers(Fixture.object(Fixture.caiyunWeather)))
        #expect(!String(decoding: body, as: UTF8.self).contains("12.3"))
        let r = try report(body)
        #expect(r.current?.temperatureC == 12)
        #expect(r.current?.humidity == 1)  // 0.62 rounds to 1: still a valid fraction
        #expect(r.daily[0].temperatureMaxC == 15)  // 14.5 rounds half away from zero
        #expect(r.daily[1].precipitationProbability == 0.25)
    }

    /// A `server_time` no wire timestamp can carry (beyond Int64 it used to trap and take the
    /// worker down; far past 9999 or before 1970 it printed a malformed time) is null, and the
    /// answer is still served.
    @Test(arguments: [1e300, -1e300, 9.3e18, 1e16, -1e18, -1, 253_402_300_800])
    func serverTimeOutsideTheWireFormatIsNull(value: Double) throws {
        let r = try report(modified { $0["server_time"] = value })
        let c = try #require(r.current)
        #expect(c.observedAt == nil)
    }

    @Test func missingOptionalFieldsBecomeNullNotInvented() throws {
        let body = try modified { o in
            o["server_time"] = nil
            var result = o["result"] as! [String: Any]
            var realtime = result["realtime"] as! [String: Any]
            realtime["apparent_temperature"] = nil
            realtime["precipitation"] = nil
            realtime["skycon"] = nil
            realtime["wind"] = [String: Any]()
            result["realtime"] = realtime
            var daily = result["daily"] as! [String: Any]
            var precipitation = daily["precipitation"] as! [[String: Any]]
            precipitation[1]["probability"] = nil
            daily["precipitation"] = precipitation
            var temperature = daily["temperature"] as! [[String: Any]]
            temperature[2]["min"] = NSNull()
            daily["temperature"] = temperature
            var skycon = daily["skycon"] as! [[String: Any]]
            skycon.remove(at: 3)
            daily["skycon"] = skycon
            result["daily"] = daily
            o["result"] = result
        }
        let r = try report(body)
        let c = try #require(r.current)
        #expect(c.observedAt == nil)  // no server_time: not the fetch time, which would be invented
        #expect(String(decoding: r.json, as: UTF8.self).contains(#""current":{"observedAt":null,"#))
        #expect(c.apparentTemperatureC == nil)
        #expect(c.precipitationMmPerHour == nil)
        #expect(c.windSpeedKph == nil)
        #expect(c.condition == .unknown)
        #expect(c.temperatureC == 12.3)
        #expect(r.daily[1].precipitationProbability == nil)
        #expect(r.daily[2].temperatureMinC == nil)
        #expect(r.daily[2].temperatureMaxC == 9.8)
        #expect(r.daily[3].condition == .unknown)
        #expect(r.daily.count == 7)

        // Nulls are written as `null`, not dropped, so clients see the field.
        let json = String(decoding: try JSONEncoder().encode(r), as: UTF8.self)
        #expect(json.contains("\"apparentTemperatureC\":null"))
    }

    @Test func unknownExtraFieldsAreIgnored() throws {
        let plain = try report(Fixture.bytes(Fixture.caiyunWeather))
        let extra = try report(Fixture.encode(Fixture.withExtraFields(Fixture.object(Fixture.caiyunWeather))))
        #expect(extra == plain)
    }

    @Test func missingRequiredStructuresAreUnparseable() throws {
        #expect(throws: ProviderFailure.unparseable) {
            try report(
                modified { o in
                    var result = o["result"] as! [String: Any]
                    result["daily"] = nil
                    o["result"] = result
                })
        }
        #expect(throws: ProviderFailure.unparseable) {
            try report(
                modified { o in
                    var result = o["result"] as! [String: Any]
                    result["daily"] = ["status": "ok"]
                    o["result"] = result
                })
        }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["timezone"] = nil }) }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["result"] = nil }) }
        let noRealtime = try modified { o in
            var result = o["result"] as! [String: Any]
            result["realtime"] = nil
            o["result"] = result
        }
        // A forecast without it keeps its days, with a current block of nulls (was a failure).
        #expect(try report(noRealtime).current == .unknown)
        #expect(try report(noRealtime).daily.count == 7)
        // A trip never uses realtime, so its absence does not matter there.
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-01")!, end: LocalDate("2026-12-01")!)
        #expect(try report(noRealtime, trip).daily.count == 1)
        #expect(throws: ProviderFailure.unparseable) {
            try report(
                modified { o in
                    var result = o["result"] as! [String: Any]
                    var daily = result["daily"] as! [String: Any]
                    daily["skycon"] = [["date": "tomorrow", "value": "CLOUDY"]]
                    result["daily"] = daily
                    o["result"] = result
                })
        }
    }

    @Test func errorBodiesAreProviderErrorsAndStatusesAreChecked() throws {
        let error = try Fixture.bytes(Fixture.caiyunError)
        #expect(throws: ProviderFailure.httpStatus(400, retryAfter: nil)) { try report(error, status: 400) }
        // A 200 that says "failed" is still a failure.
        #expect(throws: ProviderFailure.providerError) { try report(error) }
        #expect(throws: ProviderFailure.providerError) { try report(modified { $0["status"] = nil }) }
        #expect(throws: ProviderFailure.providerError) {
            try report(
                modified { o in
                    var result = o["result"] as! [String: Any]
                    var daily = result["daily"] as! [String: Any]
                    daily["status"] = "failed"
                    result["daily"] = daily
                    o["result"] = result
                })
        }
        #expect(throws: ProviderFailure.httpStatus(429, retryAfter: 30)) {
            try CaiyunProvider.report(
                from: HTTPResult(status: 429, retryAfterSeconds: 30, body: error),
                for: .forecast(days: 7), at: shanghai, now: fixtureNow
            )
        }
    }

    @Test func fieldsOfTheWrongTypeMakeTheAnswerUnparseable() throws {
        /// The fixture with `change` made to `result[part]`.
        func result(_ part: String, _ change: @escaping (inout [String: Any]) -> Void) throws -> [UInt8] {
            try modified { o in
                var result = o["result"] as! [String: Any]
                var object = result[part] as! [String: Any]
                change(&object)
                result[part] = object
                o["result"] = result
            }
        }
        func realtime(_ change: @escaping (inout [String: Any]) -> Void) throws -> [UInt8] { try result("realtime", change) }
        func daily(_ change: @escaping (inout [String: Any]) -> Void) throws -> [UInt8] { try result("daily", change) }
        #expect(throws: ProviderFailure.unparseable) { try report(realtime { $0["temperature"] = "12.3" }) }
        #expect(throws: ProviderFailure.unparseable) { try report(realtime { $0["wind"] = 5 }) }
        #expect(throws: ProviderFailure.unparseable) { try report(realtime { $0["skycon"] = ["CLOUDY"] }) }
        #expect(throws: ProviderFailure.unparseable) { try report(daily { $0["temperature"] = ["date": "2026-11-30"] }) }
        #expect(throws: ProviderFailure.unparseable) { try report(daily { $0["skycon"] = [NSNull()] }) }
        #expect(throws: ProviderFailure.unparseable) {
            try report(
                daily { d in
                    var t = d["temperature"] as! [[String: Any]]
                    t[0]["date"] = nil
                    d["temperature"] = t
                })
        }
        #expect(throws: ProviderFailure.unparseable) { try report(modified { $0["server_time"] = "now" }) }
        // A null is an absent value, not a wrong type.
        #expect(try report(realtime { $0["temperature"] = NSNull() }).current?.temperatureC == nil)
        // An error answer is recognised by its status, whatever the rest holds.
        #expect(throws: ProviderFailure.providerError) { try report(Array(#"{"status":"failed","result":7}"#.utf8)) }
    }

    @Test func aFieldGivenTwiceCountsTheFirstTime() throws {
        let plain = try Fixture.bytes(Fixture.caiyunWeather)
        let text = String(decoding: plain, as: UTF8.self)
        let brace = try #require(text.firstIndex(of: "{"))
        let twice = Array((String(text[...brace]) + #""timezone":"Asia/Tokyo","# + String(text[text.index(after: brace)...])).utf8)
        #expect(try report(twice).timezone == "Asia/Tokyo")
    }

    /// HTML, a cut body or an empty one with a success status is not JSON (which pauses the
    /// provider); JSON of another shape is unparseable (which does not).
    @Test func htmlAndCutBodiesAreNotJSONAndOtherJSONIsUnparseable() throws {
        let html = Array("<html><body><h1>502 Bad Gateway</h1></body></html>".utf8)
        #expect(throws: ProviderFailure.httpStatus(502, retryAfter: nil)) { try report(html, status: 502) }
        #expect(throws: ProviderFailure.notJSON) { try report(html) }
        #expect(throws: ProviderFailure.notJSON) { try report(Array(#"{"status": "ok", "result": {"#.utf8)) }
        #expect(throws: ProviderFailure.notJSON) { try report([]) }
        #expect(throws: ProviderFailure.unparseable) { try report(Array("[1,2,3]".utf8)) }
    }
}
