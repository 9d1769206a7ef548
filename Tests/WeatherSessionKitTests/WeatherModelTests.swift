import Foundation
import Testing
import WeatherSessionKit

@Suite("Models")
struct WeatherModelTests {
    @Test func sessionResponseDecodesAllSevenFields() throws {
        let json = """
            {"anonymousSessionId": "aws_a", "weatherAccessToken": "wta_b", "refreshToken": "wtr_c",
             "expiresAt": "2026-06-03T20:00:00Z", "refreshAfter": "2026-06-03T14:00:00Z",
             "expiresIn": 43200, "refreshTokenExpiresAt": "2026-07-03T08:00:00Z"}
            """
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601

        let response = try decoder.decode(WeatherSessionResponse.self, from: Data(json.utf8))

        #expect(response.anonymousSessionId == "aws_a")
        #expect(response.weatherAccessToken == "wta_b")
        #expect(response.refreshToken == "wtr_c")
        #expect(response.expiresIn == 43200)
        #expect(response.expiresAt.timeIntervalSince(response.refreshAfter) == .hours(6))
        #expect(response.refreshTokenExpiresAt.timeIntervalSince(response.expiresAt) == .days(30) - .hours(12))
    }

    @Test func localDeadlinesComeFromExpiresInNotFromServerClock() throws {
        // The server thinks it is 2020; the phone thinks it is 2030. Only differences count.
        let server = Date(timeIntervalSince1970: 1_600_000_000)
        let response = WeatherSessionResponse(
            anonymousSessionId: "aws_a", weatherAccessToken: "wta_b", refreshToken: "wtr_c",
            expiresAt: server + .hours(12), refreshAfter: server + .hours(6), expiresIn: 43_200,
            refreshTokenExpiresAt: server + .days(30))
        let requestedAt = Date(timeIntervalSince1970: 1_900_000_000)

        let session = WeatherSession(response: response, requestedAt: requestedAt)

        #expect(session.expiresAt == requestedAt + .hours(12))
        #expect(session.refreshAfter == requestedAt + .hours(6))
        #expect(session.refreshTokenExpiresAt == requestedAt + .days(30))
    }

    @Test func refreshHintOutsideTheTokenLifetimeIsClamped() throws {
        let server = Date(timeIntervalSince1970: 1_600_000_000)
        let requestedAt = Date(timeIntervalSince1970: 1_900_000_000)
        func session(refreshAfter: Date) -> WeatherSession {
            WeatherSession(
                response: WeatherSessionResponse(
                    anonymousSessionId: "a", weatherAccessToken: "b", refreshToken: "c",
                    expiresAt: server + .hours(12), refreshAfter: refreshAfter, expiresIn: 43_200,
                    refreshTokenExpiresAt: server + .days(30)),
                requestedAt: requestedAt)
        }

        #expect(session(refreshAfter: server - .hours(1)).refreshAfter == requestedAt)
        #expect(session(refreshAfter: server + .hours(13)).refreshAfter == requestedAt + .hours(12))
    }

    @Test func weatherResponseDecodesNullMeasurementsAsNilAndUnknownConditionAsUnknown() throws {
        let json = """
            {"authMode": "weather_token", "provider": "visualcrossing",
             "location": {"lat": -33.85, "lon": 151.2}, "timezone": "Australia/Sydney",
             "current": {"observedAt": null, "temperatureC": null,
                         "apparentTemperatureC": null, "humidity": null, "windSpeedKph": null,
                         "precipitationMmPerHour": null, "condition": "volcanic_ash"},
             "daily": [], "fetchedAt": "2026-11-30T02:03:11Z", "cache": "stale"}
            """
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601

        let report = try decoder.decode(WeatherResponse.self, from: Data(json.utf8))

        #expect(report.authMode == .weatherToken)
        #expect(report.cache == .stale)
        let current = try #require(report.current)
        #expect(current.observedAt == nil)
        #expect(current.temperatureC == nil)
        #expect(current.humidity == nil)
        #expect(current.condition == .unknown)
    }

    @Test func errorEnvelopeDecodesIntoWeatherAPIError() {
        let response = WeatherHTTPResponse(
            status: 429,
            headers: ["retry-after": "30"],
            body: Data(#"{"error": {"code": "rate_limited", "message": "slow down"}}"#.utf8))

        #expect(
            WeatherAPIError(response: response)
                == WeatherAPIError(status: 429, code: "rate_limited", message: "slow down", retryAfter: 30))
    }

    /// A `Retry-After` past a day (a broken proxy's `Int.max`) is taken as a day, and a negative
    /// one as 0: a hold of `Int.max` seconds overflowed when the service counted it down.
    @Test func retryAfterIsKeptWithinADay() {
        func parsed(_ value: String) -> Int? {
            WeatherAPIError(response: WeatherHTTPResponse(status: 429, headers: ["retry-after": value], body: Data())).retryAfter
        }
        #expect(parsed("9223372036854775807") == 86_400)
        #expect(parsed("86401") == 86_400 && parsed("86400") == 86_400 && parsed("30") == 30)
        #expect(parsed("-5") == 0 && parsed("soon") == nil)
    }

    /// Every error code the contract (API.md) names has a constant, and so have the gateway's own
    /// 5xx codes and the envelope its web server sends when it cannot reach the gateway.
    @Test func everyErrorCodeOfTheContractHasAConstant() {
        typealias Code = WeatherAPIError.Code
        let constants = [
            Code.invalidRequest, Code.unauthorized, Code.invalidRefreshToken, Code.refreshTokenReused,
            Code.notFound, Code.methodNotAllowed, Code.payloadTooLarge, Code.unsupportedMediaType,
            Code.rateLimited, Code.providerError, Code.providerTimeout, Code.providerNotConfigured,
            Code.internalError, Code.storageUnavailable, Code.serviceUnavailable,
        ]
        #expect(
            constants == [
                "invalid_request", "unauthorized", "invalid_refresh_token", "refresh_token_reused",
                "not_found", "method_not_allowed", "payload_too_large", "unsupported_media_type",
                "rate_limited", "provider_error", "provider_timeout", "provider_not_configured",
                "internal_error", "storage_unavailable", "service_unavailable",
            ])
    }

    /// An app that logs any `Error` by its `localizedDescription` reads the status and the code,
    /// not Foundation's "The operation could not be completed".
    @Test func localizedDescriptionOfAnAPIErrorSaysStatusAndCode() {
        let error: any Error = WeatherAPIError(
            status: 503, code: WeatherAPIError.Code.storageUnavailable, message: "try again shortly", retryAfter: 5)
        #expect(error.localizedDescription == "503 storage_unavailable: try again shortly (retry after 5 s)")
    }

    @Test(arguments: ["2026-02-29", "2026-13-01", "2026-04-31", "26-01-01", "2026-1-01", "2026-01-01T00:00:00Z", ""])
    func calendarDateRejectsImpossibleOrMalformedDays(text: String) {
        #expect(CalendarDate(text) == nil)
    }

    @Test func calendarDateParsesLeapDayAndPrintsWireForm() throws {
        let leap = try #require(CalendarDate("2028-02-29"))
        #expect(leap.description == "2028-02-29")
        #expect(try #require(CalendarDate("2026-12-24")) < leap)
        let inTokyo = CalendarDate(Date(timeIntervalSince1970: 1_798_729_200), in: try #require(TimeZone(identifier: "Asia/Tokyo")))
        #expect(inTokyo.description == "2027-01-01")
    }

    /// A `Date` outside years 1–9999 (an app's arithmetic gone wrong) gives the nearest day the
    /// type holds; it stopped the app before.
    @Test func calendarDateOfADateOutsideYearsOneToNineThousandIsClamped() throws {
        let utc = try #require(TimeZone(identifier: "UTC"))
        #expect(CalendarDate(Date(timeIntervalSince1970: 1e12), in: utc).description == "9999-12-31")  // year ~33,600
        #expect(CalendarDate(Date(timeIntervalSince1970: -1e12), in: utc).description == "0001-01-01")  // year ~29,700 BC
        #expect(CalendarDate(Date(timeIntervalSince1970: 253_402_300_799), in: utc).description == "9999-12-31")
        #expect(CalendarDate(Date(timeIntervalSince1970: .nan), in: utc).description == "0001-01-01")
        #expect(CalendarDate(Date(timeIntervalSince1970: .infinity), in: utc).description == "9999-12-31")
        // Proleptic Gregorian throughout, as the wire format and `daysIn` count (Foundation's
        // calendar counts Julian days before 1582: 0001-01-03 for the first instant, and a
        // February 29th in 1500, which the Gregorian calendar does not have).
        #expect(CalendarDate(Date(timeIntervalSince1970: -62_135_596_800), in: utc).description == "0001-01-01")
        #expect(CalendarDate(Date(timeIntervalSince1970: -14_826_672_000), in: utc).description == "1500-03-01")
        #expect(CalendarDate(Date(timeIntervalSince1970: -14_826_672_001), in: utc).description == "1500-02-28")
        // Every day of a stretch that crosses leap days, centuries and the epoch, against the parser.
        for day in stride(from: -1_000_000, through: 1_000_000, by: 997) {
            let date = CalendarDate(Date(timeIntervalSince1970: Double(day) * 86_400 + 43_200), in: utc)
            #expect(CalendarDate(date.description) == date)
        }
        let tokyo = try #require(TimeZone(identifier: "Asia/Tokyo"))
        #expect(CalendarDate(Date(timeIntervalSince1970: 1_798_729_199), in: tokyo).description == "2026-12-31")
        #expect(CalendarDate(Date(timeIntervalSince1970: 951_782_400), in: utc).description == "2000-02-29")
    }
}
