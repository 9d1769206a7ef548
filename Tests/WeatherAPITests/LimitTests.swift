import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
@testable import WeatherStore

/// The six quotas of API.md with an injected clock: the request past the quota gets 429 with a
/// truthful Retry-After, others are unaffected, and the quota comes back.
@Suite struct LimitTests {
    func expectLimited(_ a: TestGateway.Answer, retryAfter: Int, _ comment: Comment? = nil) {
        #expect(a.status == 429, comment)
        #expect(a.errorCode == "rate_limited", comment)
        #expect(a.headers["retry-after"] == "\(retryAfter)", comment)
    }

    @Test func sessionCreationPerIP() throws {
        let t = try TestGateway { $0.limits.sessionCreatePerIPPerHour = 2 }
        let body: [String: Any] = ["platform": "ios", "installationId": UUID().uuidString]
        for _ in 0..<2 { #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.1").status == 201) }
        expectLimited(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.1"), retryAfter: 1800)
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.2").status == 201)
        t.clock.advance(1799)
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.1").status == 429)
        t.clock.advance(1)
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.1").status == 201)
    }

    /// A creation takes its address's quota in the transaction that stores the session (one turn
    /// in the writers' queue; session 32): a refused one stores nothing, and one that fails to
    /// store (here a trigger refuses the row) spends nothing, neither from the shared bucket nor
    /// from this worker's lease of it.
    @Test func aCreationThatIsRefusedOrFailsToStoreLeavesNoTrace() throws {
        let t = try TestGateway { $0.limits.sessionCreatePerIPPerHour = 1000 }
        for _ in 0..<2 { _ = t.createSession(ip: "192.0.2.1") }
        let leased = t.gateway.limiter.leasedUnits(t.gateway.limiter.sessionCreation(ip: "192.0.2.1").key)
        #expect(leased > 0, "the second creation within a second leases")
        let tat = try t.store.rateState(t.gateway.limiter.sessionCreation(ip: "192.0.2.1").key, nowMs: t.clock.nowMs)
        #expect(tat != nil)
        try t.store.db.execute("CREATE TRIGGER refuse_sessions BEFORE INSERT ON anonymous_weather_sessions BEGIN SELECT RAISE(ABORT, 'refused'); END")
        let body: [String: Any] = ["platform": "ios", "installationId": UUID().uuidString]
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.1").status == 503)
        #expect(
            t.gateway.limiter.leasedUnits(t.gateway.limiter.sessionCreation(ip: "192.0.2.1").key) == leased,
            "a leased unit spent on a creation that stored nothing")
        // An address this worker holds no lease of: its unit comes from the shared bucket.
        let other = LimitBucket(key: t.gateway.limiter.sessionCreation(ip: "192.0.2.2").key, quota: Quota(limit: 1000, window: 3600))
        #expect(try t.store.take([other], extra: [0], nowMs: t.clock.nowMs) == .granted([1]))
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.2").status == 503)
        #expect(try t.store.rateState(other.key, nowMs: t.clock.nowMs) == t.clock.nowMs + 3_600, "charged for a creation that stored nothing")
        try t.store.db.execute("DROP TRIGGER refuse_sessions")
        #expect(try t.store.rateState(t.gateway.limiter.sessionCreation(ip: "192.0.2.1").key, nowMs: t.clock.nowMs) == tat)

        let small = try TestGateway { $0.limits.sessionCreatePerIPPerHour = 1 }
        _ = small.createSession(ip: "192.0.2.3")
        expectLimited(small.send("POST", "/v1/weather/session", body: body, ip: "192.0.2.3"), retryAfter: 3600)
        #expect(try small.store.db.scalarInt("SELECT count(*) FROM anonymous_weather_sessions") == 1)
        #expect(try small.store.db.scalarInt("SELECT count(*) FROM weather_session_tokens") == 2)
    }

    /// An IPv6 client rotating through its own /64 still meets the per-IP quota; the next /64
    /// is another client.
    @Test func sessionCreationPerIPv6Subnet() throws {
        let t = try TestGateway { $0.limits.sessionCreatePerIPPerHour = 2 }
        let body: [String: Any] = ["platform": "ios", "installationId": UUID().uuidString]
        let statuses = (2...11).map { t.send("POST", "/v1/weather/session", body: body, ip: "2001:db8:0:1::\(String($0, radix: 16))").status }
        #expect(statuses == [201, 201] + Array(repeating: 429, count: 8))
        #expect(t.send("POST", "/v1/weather/session", body: body, ip: "2001:db8:0:2::1").status == 201)
    }

    @Test func refreshPerSession() throws {
        let t = try TestGateway { $0.limits.refreshPerSessionPerHour = 2 }
        var s = t.createSession()
        for _ in 0..<2 {
            let r = t.refresh(s)
            #expect(r.status == 200)
            s = r.json
        }
        expectLimited(t.refresh(s), retryAfter: 1800)
        #expect(t.refresh(t.createSession()).status == 200)
        t.clock.advance(1800)
        #expect(t.refresh(s).status == 200)
    }

    /// The refresh quota is charged only for a refresh token of the named session: another
    /// session's token, an unknown one, or any token under a made-up session id is 401 and uses
    /// up nothing, so whoever knows a session id cannot spend its refreshes.
    @Test func refreshQuotaIsChargedOnlyForTheSessionsOwnTokens() throws {
        let t = try TestGateway { $0.limits.refreshPerSessionPerHour = 2 }
        var s = t.createSession()
        let other = t.createSession()
        let unknown = "wtr_" + String(repeating: "A", count: 43)
        for token in [other["refreshToken"] as? String, unknown, unknown, unknown] {
            let r = t.refresh(s, token: token)
            #expect(r.status == 401 && r.errorCode == "invalid_refresh_token")
        }
        let madeUp: [String: Any] = ["anonymousSessionId": "aws_" + String(repeating: "b", count: 22), "refreshToken": unknown]
        #expect((0..<3).map { _ in t.refresh(madeUp).status } == [401, 401, 401])
        for _ in 0..<2 {
            let r = t.refresh(s)
            #expect(r.status == 200)
            s = r.json
        }
        expectLimited(t.refresh(s), retryAfter: 1800)
    }

    /// A spent refresh token is not charged: the same request again inside the retry window gets
    /// its pair with the quota used up (it was 429, and after the `Retry-After` a replay that
    /// revoked the session), and a replay after the window revokes the session however empty
    /// the quota is (it was 429, and the session lived on).
    @Test func aRetryOrAReplayOfASpentRefreshTokenIsNotCharged() throws {
        let t = try TestGateway { $0.limits.refreshPerSessionPerHour = 2 }
        let s0 = t.createSession()
        let s1 = t.refresh(s0).json
        let second = t.refresh(s1)
        #expect(second.status == 200)
        let s2 = second.json
        expectLimited(t.refresh(s2), retryAfter: 1800)  // a new rotation: the quota is spent

        // The second rotation's answer was lost: the same request again, at once.
        let retried = t.refresh(s1)
        #expect(retried.status == 200, "\(retried.status) \(retried.errorCode ?? "")")
        #expect(retried.json["refreshToken"] as? String == s2["refreshToken"] as? String)
        #expect(retried.json["weatherAccessToken"] as? String == s2["weatherAccessToken"] as? String)

        t.clock.advance(31)  // past the retry window, inside the quota's hour
        let replay = t.refresh(s0)
        #expect(replay.status == 401 && replay.errorCode == "refresh_token_reused", "\(replay.status)")
        #expect(t.weather(token: s2["weatherAccessToken"] as? String).status == 401, "the session lived on")
    }

    /// The same refresh sent twice at once, to two workers: one rotates and is charged, the other
    /// gets the same pair and is not. Both were charged (each read the token unspent before the
    /// other rotated it), so duplicates used up the quota and got 429, and so did the client's
    /// next, legitimate refresh (a black-box race hunt: 5 of 20 bursts of 8).
    @Test func duplicatesOfOneRefreshAtOnceAreChargedOnce() throws {
        let a = try TestGateway { $0.limits.refreshPerSessionPerHour = 2 }
        let b = try TestGateway(workerBeside: a)
        let s0 = a.createSession()
        var duplicate: TestGateway.Answer?
        a.store.betweenRotationReadAndWrite = { duplicate = b.refresh(s0) }
        let first = a.refresh(s0)
        a.store.betweenRotationReadAndWrite = nil
        #expect(duplicate?.status == 200 && first.status == 200)
        #expect(first.json["refreshToken"] as? String == duplicate?.json["refreshToken"] as? String, "one successor pair")
        let second = b.refresh(first.json)
        #expect(second.status == 200, "the duplicate used up the quota: \(second.status)")
        expectLimited(a.refresh(second.json), retryAfter: 1800)
    }

    @Test func weatherPerSession() throws {
        let t = try TestGateway { $0.limits.requestsPerSessionPerHour = 3 }
        let a = t.createSession()["weatherAccessToken"] as? String
        for _ in 0..<3 { #expect(t.weather(token: a).status == 200) }
        expectLimited(t.weather(token: a), retryAfter: 1200)
        #expect(t.weather(token: t.createSession()["weatherAccessToken"] as? String).status == 200)
        t.clock.advance(1200)
        #expect(t.weather(token: a).status == 200)
    }

    /// Two quotas refuse at once: `Retry-After` is the longer wait, after which the request
    /// passes, not the first bucket's, after which the other one would refuse again.
    @Test func retryAfterIsTheLongestWaitOfEveryRefusingQuota() throws {
        let t = try TestGateway {
            $0.limits.requestsPerSessionPerHour = 4  // one every 900 s
            $0.limits.requestsPerIPPerHour = 2  // one every 1,800 s
        }
        let a = t.createSession()["weatherAccessToken"] as? String
        for ip in ["192.0.2.1", "192.0.2.1", "192.0.2.2", "192.0.2.2"] { #expect(t.weather(token: a, ip: ip).status == 200) }
        expectLimited(t.weather(token: a, ip: "192.0.2.1"), retryAfter: 1800, "the session's bucket refuses first, the address's longer")
        t.clock.advance(900)
        #expect(t.weather(token: a, ip: "192.0.2.1").status == 429)
        t.clock.advance(900)
        #expect(t.weather(token: a, ip: "192.0.2.1").status == 200)
    }

    /// The same between an hourly quota and the distinct-cell quota, both ways: refused by the
    /// session's bucket while its cells are full (found full by another worker), the client is
    /// told the cells' wait, not the bucket's; refused by cells this worker knows full while the
    /// address's bucket is empty for longer, the bucket's. A contract audit (session 30) found
    /// the first bucket's wait sent, after which the other quota refused again.
    @Test func retryAfterIsTheLongerOfAnHourlyAndTheCellWait() throws {
        let a = try TestGateway {
            $0.limits.gridCellsPerSessionPerDay = 1
            $0.limits.requestsPerSessionPerHour = 2  // one every 1,800 s
            $0.tokenPolicy.accessTTL = 2 * 86_400
        }
        let b = try TestGateway(workerBeside: a)
        let token = a.createSession()["weatherAccessToken"] as? String
        #expect(a.weather(token: token, query: "lat=10&lon=10").status == 200)
        #expect(a.weather(token: token, query: "lat=10&lon=10").status == 200)
        // b has not seen the cells full: its bucket refuses first, and the cells' wait is longer.
        expectLimited(b.weather(token: token, query: "lat=20&lon=20"), retryAfter: 86_400, "the cells' wait, not the bucket's 1,800 s")
        #expect(b.log.lines.last?.contains(" refused=weather_session") == true, "\(b.log.lines.last ?? "")")
        // A cell already counted is refused only by the bucket, with the bucket's wait.
        expectLimited(b.weather(token: token, query: "lat=10&lon=10"), retryAfter: 1800)

        // The other way: cells known full here, and an address's bucket empty for longer.
        let t = try TestGateway {
            $0.limits.gridCellsPerSessionPerDay = 1
            $0.limits.requestsPerIPPerHour = 1  // one an hour
            $0.limits.dayWindow = 600  // cells count for ten minutes
            $0.tokenPolicy.accessTTL = 2 * 86_400
        }
        let c = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: c, query: "lat=10&lon=10", ip: "192.0.2.9").status == 200)
        expectLimited(t.weather(token: c, query: "lat=20&lon=20", ip: "192.0.2.8"), retryAfter: 600, "this worker learns the cells are full")
        expectLimited(t.weather(token: c, query: "lat=20&lon=20", ip: "192.0.2.9"), retryAfter: 3600, "the address's wait, longer than the cells'")
        t.clock.advance(600)
        expectLimited(t.weather(token: c, query: "lat=20&lon=20", ip: "192.0.2.9"), retryAfter: 3000)
        #expect(t.weather(token: c, query: "lat=20&lon=20", ip: "192.0.2.8").status == 200, "the cell window ended")
    }

    @Test func weatherPerIP() throws {
        let t = try TestGateway { $0.limits.requestsPerIPPerHour = 3 }
        let a = t.createSession()["weatherAccessToken"] as? String
        let b = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: a, ip: "2001:db8::1").status == 200)
        #expect(t.weather(token: b, ip: "2001:db8::1").status == 200)
        #expect(t.weather(token: nil, legacy: "legacy-token-0123456789", ip: "2001:db8::1").status == 200)
        expectLimited(t.weather(token: b, ip: "2001:db8:0::1"), retryAfter: 1200, "the same IPv6 address in another spelling")
        #expect(t.weather(token: a, ip: "2001:db8::2").status == 429)  // the same /64
        #expect(t.weather(token: a, ip: "2001:db8:0:1::2").status == 200)  // another /64
    }

    @Test func distinctGridCellsPerSessionPerDay() throws {
        let t = try TestGateway {
            $0.limits.gridCellsPerSessionPerDay = 2
            $0.tokenPolicy.accessTTL = 2 * 86_400  // outlive the day window
        }
        let session = t.createSession()
        let a = session["weatherAccessToken"] as? String
        #expect(t.weather(token: a, query: "lat=10&lon=10").status == 200)
        t.clock.advance(3600)
        #expect(t.weather(token: a, query: "lat=20&lon=20").status == 200)
        #expect(t.weather(token: a, query: "lat=10.01&lon=10.01").status == 200, "same cell again")
        expectLimited(t.weather(token: a, query: "lat=30&lon=30"), retryAfter: 82_800)
        // The operator can find the session that scans (and `weatherctl revoke` it); an id, no token.
        let id = try #require(session["anonymousSessionId"] as? String)
        #expect(t.log.lines.last?.hasSuffix(" refused=cells session=\(id)") == true, "\(t.log.lines.last ?? "")")
        #expect(t.log.lines.dropLast().allSatisfy { !$0.contains("session=") }, "only a refused request names its session")
        #expect(t.weather(token: t.createSession()["weatherAccessToken"] as? String, query: "lat=30&lon=30").status == 200)
        t.clock.advance(82_800)
        #expect(t.weather(token: a, query: "lat=30&lon=30").status == 200)
    }

    /// A trip beyond what the cell's outlook holds is a provider call of its own for every date
    /// range, so each range counts as a cell: a session asking far trips of ever new dates made
    /// a Visual Crossing call (a record per day) each time, up to its 120 requests an hour. The
    /// same range again, a forecast or a near trip of a counted cell costs nothing more.
    @Test func eachFarTripRangeCountsAsACell() throws {
        let t = try TestGateway { $0.limits.gridCellsPerSessionPerDay = 3 }
        let a = t.createSession()["weatherAccessToken"] as? String
        let today = t.clock.now().utcDate
        func trip(_ from: Int, _ days: Int) -> String {
            "lat=48.85&lon=2.35&start=\(today.adding(days: from))&end=\(today.adding(days: from + days - 1))"
        }
        #expect(t.weather(token: a, query: "lat=48.85&lon=2.35").status == 200)  // the cell: 1
        #expect(t.weather(token: a, query: trip(2, 3), path: "/v1/weather/trip").status == 200, "a near trip is the cell's")
        #expect(t.weather(token: a, query: trip(40, 5), path: "/v1/weather/trip").status == 200)  // 2
        #expect(t.weather(token: a, query: trip(60, 5), path: "/v1/weather/trip").status == 200)  // 3
        expectLimited(t.weather(token: a, query: trip(80, 5), path: "/v1/weather/trip"), retryAfter: 86_400)
        #expect(t.weather(token: a, query: trip(40, 5), path: "/v1/weather/trip").status == 200, "a range already counted")
        #expect(t.weather(token: a, query: "lat=48.85&lon=2.35&days=3").status == 200)
        #expect(t.weather(token: t.createSession()["weatherAccessToken"] as? String, query: trip(80, 5), path: "/v1/weather/trip").status == 200)
    }

    /// Requests the distinct-cell quota refuses use up none of the hourly quotas: a client
    /// retrying a new cell does not lose the cells it was admitted to.
    @Test func aRequestRefusedForItsCellIsChargedToNoHourlyQuota() throws {
        let t = try TestGateway {
            $0.limits.gridCellsPerSessionPerDay = 1
            $0.limits.requestsPerSessionPerHour = 3
            $0.limits.requestsPerIPPerHour = 3
        }
        let a = t.createSession()["weatherAccessToken"] as? String
        #expect(t.weather(token: a, query: "lat=10&lon=10").status == 200)
        for _ in 0..<5 { expectLimited(t.weather(token: a, query: "lat=20&lon=20"), retryAfter: 86_400) }
        #expect((0..<2).map { _ in t.weather(token: a, query: "lat=10&lon=10").status } == [200, 200])
        expectLimited(t.weather(token: a, query: "lat=10&lon=10"), retryAfter: 1200)

        // A busy bucket leased to this worker gets its unit back in the lease.
        let u = try TestGateway { $0.limits.gridCellsPerSessionPerDay = 1 }
        let b = u.createSession()["weatherAccessToken"] as? String
        for _ in 0..<2 { #expect(u.weather(token: b, query: "lat=10&lon=10").status == 200) }
        let leased = u.gateway.limiter.leasedUnits(u.gateway.limiter.weather(ip: "198.51.100.7").key)
        #expect(leased > 0, "the second request within a second leases the address's bucket")
        #expect(u.weather(token: b, query: "lat=20&lon=20").status == 429)
        #expect(u.gateway.limiter.leasedUnits(u.gateway.limiter.weather(ip: "198.51.100.7").key) == leased)
    }

    /// Once a session's cells are full on a worker, a new cell is refused there with no write
    /// (while another connection holds the write lock, which any write would wait for), the
    /// wait counts down, a cell another worker counted still passes, and the quota opens again
    /// when the oldest cell stops counting.
    @Test func aSessionWithFullCellsIsRefusedWithoutAWrite() throws {
        let a = try TestGateway {
            $0.limits.gridCellsPerSessionPerDay = 2
            $0.tokenPolicy.accessTTL = 2 * 86_400  // outlive the day window
            $0.flushInterval = 3600  // no counter flush while the lock is held
        }
        let b = try TestGateway(workerBeside: a)
        let session = a.createSession()
        let token = session["weatherAccessToken"] as? String
        #expect(a.weather(token: token, query: "lat=10&lon=10").status == 200)
        a.clock.advance(3600)
        #expect(a.weather(token: token, query: "lat=20&lon=20").status == 200)
        expectLimited(b.weather(token: token, query: "lat=30&lon=30"), retryAfter: 82_800)  // b learns the cells are full
        let sessionBucket = "weather_session:\(session["anonymousSessionId"] as? String ?? "")", seenAt = a.clock.nowMs
        let tat = try a.store.rateState(sessionBucket, nowMs: seenAt)
        #expect(tat != nil)

        let holder = try SQLiteGatewayStore(path: a.config.databasePath)
        try holder.db.run("BEGIN IMMEDIATE")
        a.clock.advance(800)
        for lat in [40, 50, 60] { expectLimited(b.weather(token: token, query: "lat=\(lat)&lon=1"), retryAfter: 82_000) }
        try holder.db.run("ROLLBACK")
        #expect(
            try a.store.rateState(sessionBucket, nowMs: seenAt) == tat,
            "refusals took nothing from the session's hourly quota")

        // A cell worker a counted passes on b, though b has not seen it.
        #expect(b.weather(token: token, query: "lat=10&lon=10").status == 200)
        a.clock.advance(82_000)
        #expect(b.weather(token: token, query: "lat=70&lon=1").status == 200, "the first cell stopped counting")
    }

    @Test func legacyTokenPerIP() throws {
        let t = try TestGateway { $0.limits.legacyRequestsPerIPPerHour = 2 }
        for _ in 0..<2 { #expect(t.weather(token: nil, legacy: "legacy-token-0123456789").status == 200) }
        expectLimited(t.weather(token: nil, legacy: "legacy-token-0123456789"), retryAfter: 1800)
        #expect(t.log.lines.last?.hasSuffix(" refused=legacy_ip") == true, "the log line names the quota")
        #expect(t.weather(token: nil, legacy: "legacy-token-0123456789", ip: "192.0.2.99").status == 200)
        // Sessions from the same IP have their own quota.
        #expect(t.weather(token: t.createSession()["weatherAccessToken"] as? String).status == 200)
        t.clock.advance(1800)
        #expect(t.weather(token: nil, legacy: "legacy-token-0123456789").status == 200)
    }

    /// A busy bucket is leased to the worker that uses it, yet two workers together still serve
    /// exactly the quota: never more, and the leftovers of a lease come back once it ends.
    @Test func leasedUnitsKeepTheQuotaExactAcrossWorkers() throws {
        let a = try TestGateway {
            $0.limits.legacyRequestsPerIPPerHour = 1000
            $0.limits.requestsPerIPPerHour = 0
        }
        let b = try TestGateway(workerBeside: a)
        let legacy = "legacy-token-0123456789"
        #expect(a.weather(token: nil, legacy: legacy).status == 200)
        #expect(a.weather(token: nil, legacy: legacy).status == 200)
        // The second take within a second leases: an eighth of the 999 units left, 124, of which
        // this request uses one.
        #expect(a.gateway.limiter.leasedUnits(a.gateway.limiter.legacy(ip: "198.51.100.7").key) == 123, "the second take within a second leases")
        let tat = try a.store.rateState(a.gateway.limiter.legacy(ip: "198.51.100.7").key, nowMs: a.clock.nowMs)
        #expect(tat == a.clock.now().seconds * 1000 + Int64(1 + 124) * 3600, "the lease is charged to the shared bucket up front")

        /// Serves until both workers refuse; a limiter that never refused would end the test
        /// after 1,100 rounds (more than the whole quota) with a failure, not hang it.
        func drain() -> Int {
            var served = 0
            for _ in 0..<1_100 {
                let ra = a.weather(token: nil, legacy: legacy), rb = b.weather(token: nil, legacy: legacy)
                served += (ra.status == 200 ? 1 : 0) + (rb.status == 200 ? 1 : 0)
                if ra.status == 429 && rb.status == 429 {
                    #expect(Int(ra.headers["retry-after"] ?? "") ?? 0 >= 1)
                    return served
                }
            }
            Issue.record("the workers never both refused")
            return served
        }
        var served = 2 + drain()
        #expect(served <= 1000, "leases never let the workers together exceed the quota")
        a.clock.advance(1)  // the leases end; the next afterResponse gives their leftovers back
        a.gateway.afterResponse()
        b.gateway.afterResponse()
        #expect(a.gateway.limiter.leasedUnits(a.gateway.limiter.legacy(ip: "198.51.100.7").key) == 0)
        served += drain()
        #expect(served == 1000, "every unit of the hour is served exactly once")
    }

    @Test func aBucketWithLittleRoomIsNeverLeased() throws {
        let t = try TestGateway { $0.limits.legacyRequestsPerIPPerHour = 100 }
        for _ in 0..<5 { #expect(t.weather(token: nil, legacy: "legacy-token-0123456789").status == 200) }
        #expect(t.gateway.limiter.leasedUnits(t.gateway.limiter.legacy(ip: "198.51.100.7").key) == 0)
    }

    /// No client address is kept in a bucket key, so neither the table the workers share nor
    /// `weather_rate_limits` holds one (the privacy notice): each is counted under 16 hex digits
    /// of a SipHash keyed from the server key, alike in every worker and unlike under another
    /// key. Before session 35 the database held `create_ip:198.51.100.7`.
    @Test func addressesAreCountedUnderAKeyedHashOnly() throws {
        let t = try TestGateway {
            $0.limits.sessionCreatePerIPPerHour = 1000
            $0.limits.requestsPerIPPerHour = 1000
            $0.limits.legacyRequestsPerIPPerHour = 1000
        }
        // A second worker that counts in the database: the `-writer` file holds a table of
        // another slot count (another release's), which it leaves alone.
        let fd = open(t.config.databasePath + "-writer", O_RDWR)
        #expect(fd >= 0)
        var slots = UInt64(65_536)
        #expect(pwrite(fd, &slots, 8, 4096 + 24) == 8)
        close(fd)
        let w = try TestGateway(workerBeside: t)
        #expect(w.store.db.rateTable == nil)
        let addresses = ["198.51.100.7", "2001:db8::7"]
        for ip in addresses {
            let token = w.createSession(ip: ip)["weatherAccessToken"] as? String
            #expect(token != nil)
            #expect(w.weather(token: token, ip: ip).status == 200)
            #expect(w.weather(token: nil, legacy: "legacy-token-0123456789", ip: ip).status == 200)
        }
        let keys = try w.store.db.statement("SELECT bucket_key FROM weather_rate_limits").rows { $0.text(0) ?? "" }
        let addressKeys = keys.filter { !$0.hasPrefix("weather_session:") }
        #expect(keys.count == 8, "\(keys)")
        // The keys of the addresses as quotas count them (an IPv6 client by its /64).
        let expected = addresses.map { ClientAddress.quotaKey(remoteAddr: $0, forwardedFor: nil, trusted: []) }.flatMap { ip in
            [w.gateway.limiter.sessionCreation(ip: ip), w.gateway.limiter.weather(ip: ip), w.gateway.limiter.legacy(ip: ip)].map(\.key)
        }
        #expect(Set(addressKeys) == Set(expected))
        for key in addressKeys {
            let digits = key.split(separator: ":", maxSplits: 1).last ?? ""
            #expect(digits.count == 16 && digits.allSatisfy(\.isHexDigit) && digits == digits.lowercased(), "\(key)")
            #expect(!key.contains("198.51") && !key.contains("2001:db8"))
        }
        // Every worker keys an address alike (the first one uses the shared table), and another
        // server key keys it otherwise.
        #expect(t.gateway.limiter.weather(ip: addresses[0]).key == w.gateway.limiter.weather(ip: addresses[0]).key)
        let otherKey = Limiter(
            store: w.store, limits: w.config.limits, metrics: Metrics(flushInterval: 0), hashKey: Array("another server key, 32 bytes ok".utf8))
        #expect(otherKey.weather(ip: addresses[0]).key != w.gateway.limiter.weather(ip: addresses[0]).key)
        // A quota that is off hashes nothing.
        let off = try TestGateway { $0.limits.requestsPerIPPerHour = 0 }
        #expect(off.gateway.limiter.weather(ip: addresses[0]).key == "weather_ip:")
    }

    @Test func zeroTurnsEveryLimitOff() throws {
        let t = try TestGateway {
            $0.limits = LimitSettings()
            $0.limits.requestsPerSessionPerHour = 0
            $0.limits.requestsPerIPPerHour = 0
            $0.limits.gridCellsPerSessionPerDay = 0
            $0.limits.sessionCreatePerIPPerHour = 0
            $0.limits.refreshPerSessionPerHour = 0
        }
        let s = t.createSession()
        let a = s["weatherAccessToken"] as? String
        for i in 0..<150 { #expect(t.weather(token: a, query: "lat=\(i % 80)&lon=1").status == 200) }
        #expect(t.refresh(s).status == 200)
        #expect(try t.store.storedRateBucketCount() == 0)
    }

    /// A refresh that found room is never refused after the fact: when the session's bucket
    /// empties between the quota's read and the rotation (as another worker's refresh of it
    /// would), it rotates, uncharged, and counts no refusal. The separate after-the-fact charge
    /// counted `limited.refresh_session` for that 200 (session 32 takes the charge in the
    /// rotation's transaction).
    @Test func aRefreshWhoseQuotaEmptiedMeanwhileRotatesAndCountsNoRefusal() throws {
        let t = try TestGateway { $0.limits.refreshPerSessionPerHour = 1 }
        let s = t.createSession()
        let key = "refresh_session:\(s["anonymousSessionId"] as? String ?? "")"
        let full = t.clock.now().seconds * 1000 + 3_600_000  // one unit an hour, just spent
        let store = t.store
        let nowMs = t.clock.nowMs
        store.betweenRotationReadAndWrite = {
            // Another worker's refresh of the session empties its bucket.
            _ = try? store.take([LimitBucket(key: key, quota: Quota(limit: 1, window: 3600))], extra: [0], nowMs: nowMs)
        }
        let r = t.refresh(s)
        store.betweenRotationReadAndWrite = nil
        #expect(r.status == 200, "\(r.status) \(r.errorCode ?? "")")
        #expect(try t.store.rateState(key, nowMs: nowMs) == full, "charged beyond full")
        #expect(try t.store.db.scalarInt("SELECT count(*) FROM weather_counters WHERE name IN ('limited.refresh_session', 'status.429')") == 0)
        expectLimited(t.refresh(r.json), retryAfter: 3600)
    }

    @Test func limitedRequestsAreCounted() throws {
        let t = try TestGateway { $0.limits.legacyRequestsPerIPPerHour = 1 }
        _ = t.weather(token: nil, legacy: "legacy-token-0123456789")
        _ = t.weather(token: nil, legacy: "legacy-token-0123456789")
        let rows = try t.store.db.statement("SELECT name, value FROM weather_counters WHERE name IN ('status.429', 'limited.legacy_ip') ORDER BY name").rows {
            "\($0.text(0)!)=\($0.int(1))"
        }
        #expect(rows == ["limited.legacy_ip=1", "status.429=1"])
    }

    @Test func forwardedForBelievedOnlyFromTrustedProxies() throws {
        let untrusted = try TestGateway { $0.limits.legacyRequestsPerIPPerHour = 1 }
        func legacy(_ t: TestGateway, xff: String) -> Int {
            t.send("GET", "/v1/weather?lat=1&lon=1", headers: ["X-Weather-Token": "legacy-token-0123456789", "X-Forwarded-For": xff], ip: "10.0.0.5").status
        }
        #expect(legacy(untrusted, xff: "203.0.113.1") == 200)
        #expect(legacy(untrusted, xff: "203.0.113.2") == 429, "a spoofed header opens no new quota")
        let trusted = try TestGateway {
            $0.limits.legacyRequestsPerIPPerHour = 1
            $0.trustedProxies = [CIDR("10.0.0.0/8")!]
        }
        #expect(legacy(trusted, xff: "203.0.113.1") == 200)
        #expect(legacy(trusted, xff: "203.0.113.2") == 200)
        #expect(legacy(trusted, xff: "198.51.100.1, 203.0.113.1") == 429, "right-most untrusted hop counts")
        #expect(legacy(trusted, xff: "2001:db8::7") == 200)
    }
}
