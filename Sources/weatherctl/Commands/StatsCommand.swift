import WeatherAPI
import WeatherCore
import WeatherProviders

/// `weatherctl stats`: the hourly counters the workers flush into `weather_counters`, per hour or
/// per day, with totals.
enum StatsCommand {
    static let spec = CommandSpec(
        name: "stats",
        summary: "requests by authMode, sessions, refreshes, 401s, 429s, 5xx, cache and providers, per hour or day",
        options: [
            OptionSpec(name: "--hours", value: "N", help: "the last N hours, one row each (1-8784, default 24)"),
            OptionSpec(name: "--days", value: "N", help: "the last N days, one row each (1-366; prune keeps 90 days of counters)"),
        ],
        details: """
            Reads only: also a backup copy, or the database as a user who may not write its folder
            (then a file with no -wal or -shm beside it is read immutable, and exits 1 if a worker
            changes it meanwhile). Periods are UTC and include the current, unfinished one. Columns: weather
            requests by the authMode they proved (weather_session, weather_token; also those then
            refused 400 or 429), sessions created, refreshes (including
            idempotent retries), 401, 429 and 5xx responses, cache hits, misses, stale answers because
            no provider answered (STALE) and stale answers while another worker was refreshing
            the cell (REFRESHING; both are cache: "stale" to the client), the hit ratio (hits /
            all four), and provider calls and errors. Workers flush counters every
            WEATHER_FLUSH_INTERVAL seconds (a quiet one after that long without a request), so
            the newest seconds may be missing. Below the table: calls and errors by provider, 429s
            by the quota that refused them (limited), and the weather routes' 401s by reason
            (unauthorized: legacy_off, an old app's X-Weather-Token after the legacy path was
            turned off; legacy_token, a wrong one; session_token, a session token that is not
            live; no_token), refreshes answered invalid_refresh_token by why (refresh refused:
            unknown, a token the database never held, as after a restore from a backup;
            expired; revoked, its session is; other_session), and the 5xx answers by error code (storage_unavailable: the database
            refused a write or a read, a full disk among the causes; provider_error,
            provider_timeout, provider_not_configured, ...). A worker keeps its counts until a
            flush succeeds, so a full disk's 503s appear once it has room again, counted by the
            workers still running then (a CGI process, or a worker that ends while the disk is
            full, loses its counts). --json adds these breakdowns to every period.
            Below the table: the configured providers the workers are skipping right now, in a
            pause after failing (WEATHER_PROVIDER_COOLDOWN), with its end, the failures in a row
            and the last one (--json: pausedProviders). Pauses live in the page the workers share
            beside the database (<db>-writer); a user who may not write that file sees none.
            Last: where the quotas' rate buckets (WEATHER_*_PER_*_PER_HOUR) are counted (--json:
            rateBuckets; null for a copy read as a snapshot): in the table the workers share in
            that file, with the buckets live in it now and those forgotten to make room since it
            was made (a count that keeps rising: more clients at once than its 16,384 slots, each
            such client gaining at most what it had spent) and, when there were any, the takes,
            reads and give-backs that went without it since it was made because another process
            held its lock too long (a stopped one), with the last one's time (lockMisses,
            lastLockMiss; a take then counted in the database); or in the database, and why (a
            worker whose start found no room on the disk for the table says so in its log, counts
            in the database, and tries again at each flush: it logs rate_buckets=shared_table
            once it has it); or not known, when this user cannot open that file.
            """,
        run: run)

    /// One row of the report: the counters of one hour or day, summed by name.
    struct Period {
        var label: String
        var start: Timestamp
        var end: Timestamp
        var counts: [String: Int64] = [:]

        func value(_ name: String) -> Int64 { counts[name] ?? 0 }

        var sessionRequests: Int64 { value(Counters.Name.auth(.weatherSession)) }
        var legacyRequests: Int64 { value(Counters.Name.auth(.weatherToken)) }
        var sessionsCreated: Int64 { value(Counters.Name.sessionsCreated) }
        var refreshes: Int64 { value(Counters.Name.refreshes) + value(Counters.Name.refreshRetries) }
        var unauthorized: Int64 { value(Counters.Name.status(401)) }
        var rateLimited: Int64 { value(Counters.Name.status(429)) }
        /// Answers of 500 or more, whatever their code.
        var serverErrors: Int64 { byServerError.reduce(0) { $0 + $1.1 } }
        var cacheHit: Int64 { value(Counters.Name.cache("hit")) }
        var cacheMiss: Int64 { value(Counters.Name.cache("miss")) }
        /// Stale copies answered because no provider answered (failed, paused, none configured).
        var cacheStale: Int64 { value(Counters.Name.cache("stale")) }
        /// Stale copies answered while another worker was refreshing the cell: no failure.
        var cacheRefreshing: Int64 { value(Counters.Name.cache("stale_refreshing")) }

        /// hit / (hit + miss + stale, both kinds); `nil` when no cacheable request was answered.
        var hitRatio: Double? {
            let all = cacheHit + cacheMiss + cacheStale + cacheRefreshing
            return all == 0 ? nil : Double(cacheHit) / Double(all)
        }

        /// Provider names seen in `provider.<name>.calls|errors`, sorted.
        var providers: [String] {
            Set(
                counts.keys.compactMap { name -> String? in
                    guard name.hasPrefix("provider.") else { return nil }
                    let parts = name.split(separator: ".")
                    return parts.count == 3 ? String(parts[1]) : nil
                }
            ).sorted()
        }
        var providerCalls: Int64 { providers.reduce(0) { $0 + value(Counters.Name.providerCall($1)) } }
        var providerErrors: Int64 { providers.reduce(0) { $0 + value(Counters.Name.providerError($1)) } }

        /// `limited.<name>` counts by limit name.
        var limited: [(String, Int64)] { breakdown(Counters.Name.limited("")) }
        /// `unauthorized.<reason>` counts: the weather routes' 401s by why (`AuthRefusal`).
        var refused: [(String, Int64)] { breakdown(Counters.Name.unauthorized("")) }
        /// `refresh_refused.<reason>` counts: refreshes answered `invalid_refresh_token`, by why.
        var refreshRefused: [(String, Int64)] { breakdown(Counters.Name.refreshRefused("")) }
        /// `status.5xx.<code>` counts: answers of 500 or more by their error code.
        var byServerError: [(String, Int64)] { breakdown(Counters.Name.serverError("")) }

        /// The counters named `<prefix><part>`, by part, sorted.
        func breakdown(_ prefix: String) -> [(String, Int64)] {
            counts.filter { $0.key.hasPrefix(prefix) }.map { (String($0.key.dropFirst(prefix.count)), $0.value) }.sorted { $0.0 < $1.0 }
        }
    }

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let hours = try args.integer("--hours", in: 1...8784)
        let days = try args.integer("--days", in: 1...366)
        if hours != nil && days != nil { throw .usage("give --hours or --days, not both") }
        let perDay = days != nil
        let step: Int64 = perDay ? 86_400 : 3600
        let count = Int64(days ?? hours ?? 24)
        let current = context.now.seconds - ((context.now.seconds % step) + step) % step
        var periods: [Period] = []
        for i in stride(from: count - 1, through: 0, by: -1) {
            let start = Timestamp(seconds: current - i * step)
            periods.append(Period(label: perDay ? "\(start.utcDate)" : start.iso8601, start: start, end: start.adding(seconds: step)))
        }
        let key: (String) -> String = perDay ? { String($0.prefix(10)) } : { $0 }
        var index: [String: Int] = [:]
        for (i, p) in periods.enumerated() { index[perDay ? "\(p.start.utcDate)" : CounterKey.hour(of: p.start)] = i }

        let config = try context.config(forReading: true)
        let store = try context.openStore(config, .migratedReadOnly)
        let rows = try context.storeCall { () throws(StoreError) in
            try store.counters(fromHour: CounterKey.hour(of: periods[0].start), toHour: CounterKey.hour(of: periods[periods.count - 1].end.adding(seconds: -1)))
        }
        let cooldowns = ProviderCooldowns(longest: config.providerCooldown, board: store.providerPauses)
        let paused = config.providers.compactMap { name in cooldowns.pause(of: name, now: context.now).map { (name, $0) } }
        var total = Period(label: "TOTAL", start: periods[0].start, end: periods[periods.count - 1].end)
        for row in rows {
            guard let i = index[key(row.hour)] else { continue }
            periods[i].counts[row.name, default: 0] += row.value
            total.counts[row.name, default: 0] += row.value
        }

        // A backup copy's file says nothing of where the workers count.
        let buckets = store.isReadOnlySnapshot ? nil : store.rateBuckets(now: context.now)
        context.emit(
            human: human(periods, total: total, perDay: perDay) + human(paused)
                + (buckets.map { "rate buckets: \(said($0, quotasOn: config.limits.anyRateBucket))\n" } ?? ""),
            json: .object([
                ("granularity", .string(perDay ? "day" : "hour")),
                ("from", .string(total.start.iso8601)),
                ("to", .string(total.end.iso8601)),
                ("periods", .array(periods.map { .object(json($0)) })),
                ("totals", .object(json(total))),
                (
                    "pausedProviders",
                    .array(
                        paused.map { name, pause in
                            .object([
                                ("provider", .string(name)),
                                ("until", .string(pause.until.iso8601)),
                                ("failuresInARow", .int(Int64(pause.failures))),
                                ("lastFailure", .string(pause.failure.code)),
                                ("summary", .string(pause.failure.summary)),
                            ])
                        })
                ),
                ("rateBuckets", buckets.map(json) ?? .null),
            ]))
        return ExitCode.ok
    }

    static func human(_ periods: [Period], total: Period, perDay: Bool) -> String {
        var table = Table([
            (perDay ? "DAY (UTC)" : "HOUR (UTC)", .left), ("WEATHER_SESSION", .right), ("WEATHER_TOKEN", .right),
            ("CREATED", .right), ("REFRESHES", .right), ("401", .right), ("429", .right), ("5XX", .right),
            ("CACHE HITS", .right), ("MISSES", .right), ("STALE", .right), ("REFRESHING", .right), ("HIT RATIO", .right),
            ("PROVIDER CALLS", .right), ("ERRORS", .right),
        ])
        func percent(_ r: Double?) -> String {
            guard let r else { return "-" }
            let tenths = Int((r * 1000).rounded())
            return "\(tenths / 10).\(tenths % 10)%"
        }
        for p in periods + [total] {
            table.append([
                p.label, "\(p.sessionRequests)", "\(p.legacyRequests)", "\(p.sessionsCreated)", "\(p.refreshes)",
                "\(p.unauthorized)", "\(p.rateLimited)", "\(p.serverErrors)", "\(p.cacheHit)", "\(p.cacheMiss)", "\(p.cacheStale)", "\(p.cacheRefreshing)",
                percent(p.hitRatio), "\(p.providerCalls)", "\(p.providerErrors)",
            ])
        }
        var text = table.rendered
        let providers = total.providers
        if !providers.isEmpty {
            text +=
                "\nproviders (calls/errors): "
                + providers.map {
                    "\($0) \(total.value(Counters.Name.providerCall($0)))/\(total.value(Counters.Name.providerError($0)))"
                }.joined(separator: ", ") + "\n"
        }
        var separated = !providers.isEmpty
        for (title, counts) in [
            ("limited (429 by limit)", total.limited), ("unauthorized (weather 401s by reason)", total.refused),
            ("refresh refused (invalid_refresh_token by reason)", total.refreshRefused),
            ("5xx by error code", total.byServerError),
        ] where !counts.isEmpty {
            text += (separated ? "" : "\n") + "\(title): " + counts.map { "\($0.0) \($0.1)" }.joined(separator: ", ") + "\n"
            separated = true
        }
        return text
    }

    /// `paused now: caiyun until 2026-12-01T12:55:03Z (3 failures in a row; last: provider
    /// answered HTTP 429)`, one line per provider in a pause; nothing when none is.
    static func human(_ paused: [(String, ProviderCooldowns.Entry)]) -> String {
        paused.map { name, pause in
            "paused now: \(name) until \(pause.until.iso8601) (\(pause.failures) failure\(pause.failures == 1 ? "" : "s") in a row; last: \(pause.failure.summary))\n"
        }.joined()
    }

    /// `RateBuckets.summary`, and that none is taken when every rate quota is off (0).
    static func said(_ buckets: RateBuckets, quotasOn: Bool) -> String {
        buckets.summary + (quotasOn ? "" : " (every rate quota is 0 in this configuration: none is taken)")
    }

    static func json(_ buckets: RateBuckets) -> JSONDocument {
        switch buckets {
        case .sharedTable(let t):
            .object([
                ("where", .string("sharedTable")), ("slots", .int(Int64(t.slots))), ("live", .int(Int64(t.live))),
                ("forgottenForRoom", .int(Int64(clamping: t.forgottenForRoom))), ("lockMisses", .int(Int64(clamping: t.lockMisses))),
                ("lastLockMiss", t.lastLockMiss.map { .string($0.iso8601) } ?? .null),
            ])
        case .database(let why): .object([("where", .string("database")), ("why", .string(why))])
        case .notKnown(let why): .object([("where", .string("notKnown")), ("why", .string(why))])
        }
    }

    static func json(_ p: Period) -> [(String, JSONDocument)] {
        [
            ("start", .string(p.start.iso8601)),
            ("end", .string(p.end.iso8601)),
            (
                "requests",
                .object([
                    (AuthMode.weatherSession.rawValue, .int(p.sessionRequests)),
                    (AuthMode.weatherToken.rawValue, .int(p.legacyRequests)),
                ])
            ),
            ("sessionsCreated", .int(p.sessionsCreated)),
            ("refreshes", .int(p.refreshes)),
            ("refreshRetries", .int(p.value(Counters.Name.refreshRetries))),
            ("refreshTokenReuse", .int(p.value(Counters.Name.refreshReuse))),
            ("sessionsRevokedByApp", .int(p.value(Counters.Name.revokes))),
            ("status401", .int(p.unauthorized)),
            ("status429", .int(p.rateLimited)),
            ("status5xx", .int(p.serverErrors)),
            (
                "cache",
                .object([
                    ("hit", .int(p.cacheHit)), ("miss", .int(p.cacheMiss)), ("stale", .int(p.cacheStale)),
                    ("staleWhileRefreshing", .int(p.cacheRefreshing)),
                    ("hitRatio", p.hitRatio.map { .double(($0 * 10_000).rounded() / 10_000) } ?? .null),
                ])
            ),
            (
                "providers",
                .object(
                    p.providers.map { name in
                        (
                            name,
                            .object([
                                ("calls", .int(p.value(Counters.Name.providerCall(name)))),
                                ("errors", .int(p.value(Counters.Name.providerError(name)))),
                            ])
                        )
                    })
            ),
            ("limited", .object(p.limited.map { ($0.0, .int($0.1)) })),
            ("unauthorized", .object(p.refused.map { ($0.0, .int($0.1)) })),
            ("refreshRefused", .object(p.refreshRefused.map { ($0.0, .int($0.1)) })),
            ("serverErrors", .object(p.byServerError.map { ($0.0, .int($0.1)) })),
        ]
    }
}
