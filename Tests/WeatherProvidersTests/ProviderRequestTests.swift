import Testing
import WeatherCore
import WeatherProviders

@Suite struct ProviderRequestTests {
    static func caiyun(_ transport: RecordingTransport, base: String = "https://api.caiyunapp.com") -> CaiyunProvider {
        CaiyunProvider(baseURL: base, token: "secret-token", transport: transport, timeoutSeconds: 4)
    }

    static func visualCrossing(_ transport: RecordingTransport, key: String = "secret-key") -> VisualCrossingProvider {
        VisualCrossingProvider(baseURL: "https://weather.visualcrossing.com/", apiKey: key, transport: transport, timeoutSeconds: 4)
    }

    static func date(_ offset: Int) -> LocalDate { fixtureNow.utcDate.adding(days: offset) }

    @Test func caiyunURLPutsLongitudeFirstAndUsesOnlySnappedCoordinates() throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        let point = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: 0.05)
        let report = try Self.caiyun(transport, base: "https://api.caiyunapp.com/").fetch(.forecast(days: 7), at: point, now: fixtureNow)
        #expect(
            transport.urls == [
                "https://api.caiyunapp.com/v2.6/secret-token/121.45,31.25/weather?unit=metric:v2&dailysteps=7&hourlysteps=1"
            ])
        #expect(!transport.urls[0].contains("31.2304") && !transport.urls[0].contains("121.4737"))
        #expect(report.location == point)
        #expect(report.provider == "caiyun")
        #expect(report.fetchedAt == fixtureNow.iso8601)
    }

    @Test func caiyunURLFormatsNegativeAndWholeCoordinates() throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        _ = try Self.caiyun(transport).fetch(.forecast(days: 1), at: GridPoint(lat: -33.85, lon: 151), now: fixtureNow)
        #expect(transport.urls[0].hasSuffix("/v2.6/secret-token/151,-33.85/weather?unit=metric:v2&dailysteps=1&hourlysteps=1"))
    }

    @Test func caiyunTripAsksForAllFifteenSteps() throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-01")!, end: LocalDate("2026-12-03")!)
        let report = try Self.caiyun(transport).fetch(trip, at: shanghai, now: fixtureNow)
        #expect(transport.urls[0].hasSuffix("/weather?unit=metric:v2&dailysteps=15&hourlysteps=1"))
        #expect(report.current == nil)
        #expect(report.daily.count == 3)
    }

    @Test(arguments: [
        (14, 16),  // ends after UTC today + 13
        (0, 14),
        (-2, 0),  // starts before UTC today - 1
        (200, 205),
    ])
    func caiyunTripBeyondItsHorizonIsNotCoveredWithoutACall(offsets: (Int, Int)) throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        let provider = Self.caiyun(transport)
        let trip = WeatherQuery.trip(start: Self.date(offsets.0), end: Self.date(offsets.1))
        #expect(!provider.canCover(trip, now: fixtureNow))
        #expect(throws: ProviderFailure.notCovered) { try provider.fetch(trip, at: shanghai, now: fixtureNow) }
        #expect(transport.urls.isEmpty)
    }

    @Test(arguments: [(-1, 0), (0, 13), (13, 13)])
    func caiyunTripInsideItsHorizonIsAskedFor(offsets: (Int, Int)) throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.caiyunWeather))
        let provider = Self.caiyun(transport)
        let trip = WeatherQuery.trip(start: Self.date(offsets.0), end: Self.date(offsets.1))
        #expect(provider.canCover(trip, now: fixtureNow))
        // The fixture holds 2026-11-30...12-06 only, so most of these end as notCovered after the call.
        _ = try? provider.fetch(trip, at: shanghai, now: fixtureNow)
        #expect(transport.urls.count == 1)
    }

    @Test func visualCrossingForecastURLHasNoDatesAndMetricUnits() throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.vcForecast))
        let report = try Self.visualCrossing(transport).fetch(.forecast(days: 7), at: newYork, now: fixtureNow)
        #expect(
            transport.urls == [
                "https://weather.visualcrossing.com/VisualCrossingWebServices/rest/services/timeline/40.7,-74"
                    + "?unitGroup=metric&include=current,days&key=secret-key&contentType=json&iconSet=icons2"
            ])
        #expect(report.location == newYork)
        #expect(report.provider == "visualcrossing")
    }

    @Test func visualCrossingTripURLHasTheDatesAndAnEncodedKey() throws {
        let transport = try RecordingTransport(body: Fixture.bytes(Fixture.vcTrip))
        let trip = WeatherQuery.trip(start: LocalDate("2026-12-20")!, end: LocalDate("2026-12-24")!)
        let report = try Self.visualCrossing(transport, key: "a b&c=d/e?#é").fetch(trip, at: newYork, now: fixtureNow)
        #expect(
            transport.urls == [
                "https://weather.visualcrossing.com/VisualCrossingWebServices/rest/services/timeline/40.7,-74/2026-12-20/2026-12-24"
                    + "?unitGroup=metric&include=current,days&key=a%20b%26c%3Dd%2Fe%3F%23%C3%A9&contentType=json&iconSet=icons2"
            ])
        #expect(report.daily.count == 5)
        #expect(
            VisualCrossingProvider(baseURL: "x", apiKey: "k", transport: transport, timeoutSeconds: 1)
                .canCover(trip, now: fixtureNow))
    }

    @Test func transportFailuresPassThroughUnchanged() throws {
        for failure in [ProviderFailure.timeout, .transport, .unparseable] {
            let transport = RecordingTransport([.failure(failure)])
            #expect(throws: failure) { try Self.caiyun(transport).fetch(.forecast(days: 7), at: shanghai, now: fixtureNow) }
            #expect(throws: failure) { try Self.visualCrossing(transport).fetch(.forecast(days: 7), at: newYork, now: fixtureNow) }
        }
    }

    @Test func providersNeverPrintTheirSecrets() throws {
        let transport = RecordingTransport(body: [])
        let texts = [
            "\(Self.caiyun(transport))", String(reflecting: Self.caiyun(transport)),
            "\(Self.visualCrossing(transport))", String(reflecting: Self.visualCrossing(transport)),
        ]
        var dumped = ""
        dump(Self.caiyun(transport), to: &dumped)
        dump(Self.visualCrossing(transport), to: &dumped)
        for text in texts + [dumped] {
            #expect(!text.contains("secret"))
        }
    }

    @Test func failureSummariesAreShortAndSafe() {
        let all: [ProviderFailure] = [
            .timeout, .httpStatus(429, retryAfter: 30), .httpStatus(500, retryAfter: nil),
            .providerError, .unparseable, .transport, .notCovered,
        ]
        #expect(Set(all.map(\.code)).count == 6)
        #expect(ProviderFailure.httpStatus(429, retryAfter: 30).summary == "provider answered HTTP 429, retry after 30 s")
        for failure in all {
            #expect(!failure.summary.isEmpty && failure.summary.count < 60)
        }
    }
}
