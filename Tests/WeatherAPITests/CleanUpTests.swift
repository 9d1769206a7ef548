import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
import WeatherStore

/// The workers' own clean-up (`WEATHER_PRUNE_INTERVAL`): a shared host has no prune timer, and
/// the privacy notice promises the deletions of `weatherctl prune` about once a day.
@Suite struct CleanUpTests {
    /// A session revoked `days` days before the gateway's clock, as `weatherctl revoke` leaves it.
    func revokedSession(_ t: TestGateway, daysAgo days: Int64) throws -> String {
        let id = try #require(t.createSession()["anonymousSessionId"] as? String)
        #expect(try t.store.revokeSession(id: id, now: t.clock.now().adding(seconds: -days * 86_400)))
        return id
    }

    func stored(_ t: TestGateway, _ id: String) throws -> Bool {
        try t.store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions WHERE id = ?1", [.text(id)]) == 1
    }

    func cleanUpLines(_ t: TestGateway) -> [String] { t.log.lines.filter { $0.contains("clean_up=") } }

    /// A clean-up that waited for the write lock after a response is no request's wait: the
    /// next request's line has no `db_wait_ms` (a review found a health check saying 400 ms).
    @Test func aCleanUpsWaitForTheWriteLockIsNotTheNextRequestsWait() throws {
        let t = try TestGateway { $0.pruneInterval = 90_000 }
        _ = t.createSession()  // and the first clean-up
        t.clock.advance(90_000 + 3601)
        try t.holdWriteLockElsewhere(for: 0.4)
        #expect(t.send("GET", "/v1/health").status == 200)  // its clean-up waits for the holder
        #expect(cleanUpLines(t).count == 2)
        #expect(t.send("GET", "/v1/health").status == 200)
        let line = try #require(t.log.lines.last { $0.contains("route=/v1/health") })
        #expect(!line.contains("db_wait_ms="), "\(line)")
    }

    @Test func aWorkerDeletesWhatOutlivedItsUseWhenNoCleanUpRanForADay() throws {
        let t = try TestGateway { $0.pruneInterval = 90_000 }
        let old = try revokedSession(t, daysAgo: 31)  // its creation ran the first clean-up, before the revocation
        #expect(cleanUpLines(t).count == 1)
        let recent = try revokedSession(t, daysAgo: 1)

        // Within the hour nobody looks again; at the hour the look finds the last clean-up too recent.
        t.clock.advance(3599)
        #expect(t.send("GET", "/v1/health").status == 200)
        t.clock.advance(2)
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(cleanUpLines(t).count == 1)
        #expect(try stored(t, old) && stored(t, recent))

        // A day and an hour after the first one: the old revocation goes, the recent one stays.
        t.clock.advance(90_000 - 3601)
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(try !stored(t, old))
        #expect(try stored(t, recent))
        let line = try #require(cleanUpLines(t).last)
        #expect(line.contains("clean_up=done") && line.contains("anonymous_weather_sessions=1") && line.contains("weather_session_tokens=2"), "\(line)")
        #expect(!line.contains(old) && !line.contains("request_id"), "\(line)")
        #expect(cleanUpLines(t).count == 2)
    }

    /// `weatherctl prune` (the timer, cron) ran meanwhile: the workers leave it to that. (That a
    /// dry run records nothing: `PruneTests.theWorkersCleanUpWhenNoneRanForTheInterval`.)
    @Test func aCleanUpByWeatherctlSparesTheWorkersTheirs() throws {
        let t = try TestGateway { $0.pruneInterval = 90_000 }
        let old = try revokedSession(t, daysAgo: 31)
        t.clock.advance(86_400)
        let ctl = SQLiteGatewayStore(database: try Database(path: t.config.databasePath))
        let _ = try ctl.prune(now: t.clock.now(), policy: PrunePolicy(), dryRun: false)
        #expect(try !stored(t, old))
        let another = try revokedSession(t, daysAgo: 31)
        t.clock.advance(86_400)  // 2 days after the worker's, 1 after weatherctl's
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(try stored(t, another))
        #expect(cleanUpLines(t).count == 1)
    }

    @Test func anIntervalOfZeroLeavesItToWeatherctl() throws {
        let t = try TestGateway { $0.pruneInterval = 0 }
        let old = try revokedSession(t, daysAgo: 31)
        t.clock.advance(3 * 86_400)
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(try stored(t, old))
        #expect(cleanUpLines(t).isEmpty)
    }

    /// A clean-up the database refuses is said, not thrown at a client, and tried again at the
    /// next look.
    @Test func aFailedCleanUpIsLoggedAndTriedAgainAnHourLater() throws {
        let t = try TestGateway { $0.pruneInterval = 90_000 }
        let old = try revokedSession(t, daysAgo: 31)
        try t.store.db.execute("DELETE FROM weather_maintenance")
        try t.store.db.execute("CREATE TRIGGER no_deletes BEFORE DELETE ON anonymous_weather_sessions BEGIN SELECT RAISE(ABORT, 'refused'); END")
        t.clock.advance(3600)
        #expect(t.send("GET", "/v1/health").status == 200)
        let failed = try #require(cleanUpLines(t).last)
        #expect(failed.contains("clean_up=failed") && failed.contains("storage_error="), "\(failed)")
        #expect(!failed.contains("DELETE"), "\(failed)")
        try t.store.db.execute("DROP TRIGGER no_deletes")
        t.clock.advance(3599)
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(try stored(t, old), "not before the hour")
        t.clock.advance(1)
        #expect(t.send("GET", "/v1/health").status == 200)
        #expect(try !stored(t, old))
    }
}
