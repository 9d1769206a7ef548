import WeatherCore

/// `weatherctl prune`: deletes what `PrunePolicy` says has outlived its use, in short batches.
enum PruneCommand {
    static let spec = CommandSpec(
        name: "prune",
        summary: "delete expired tokens, old revoked or abandoned sessions, dead cache and limit rows",
        options: [OptionSpec(name: "--dry-run", value: nil, help: "count what would be deleted; delete nothing")],
        details: """
            Deletes:
              tokens expired more than 1 day ago (revoked tokens are kept until they expire, so a
                rotated refresh token presented again is still caught as reuse);
              sessions revoked more than 30 days ago, with their tokens;
              other sessions none of whose tokens expires later than 30 days ago and last seen
                more than 30 days plus a refresh token's lifetime ago (WEATHER_REFRESH_TOKEN_TTL),
                with their tokens;
              weather cache rows past their stale deadline; expired fetch locks;
              rate-limit buckets that are full again (no row means a full bucket);
              grid-cell records older than the cell window (WEATHER_LIMIT_DAY_SECONDS, 1 day);
              hourly counters older than 90 days.
            A live token (not expired, not revoked, of an active session) is never deleted.
            Sessions and tokens are read 5000 at a time without the write lock and deleted 256
            rows to a transaction (sessions 64, with their tokens), with a 2 ms pause after each,
            so workers wait for the write lock only briefly and keep serving; the other tables go
            5000 rows to a statement. At the end the WAL is emptied, if no reader holds it, so
            what was deleted leaves no copy there.
            Safe to run from cron at any time, e.g. daily. A run (not a dry run) records its
            start: the workers run the same clean-up themselves only when none ran for
            WEATHER_PRUNE_INTERVAL seconds (25 hours by default; 0 = never).
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let config = try context.config()
        let policy = PrunePolicy(config: config)
        let dryRun = args.has("--dry-run")
        // A dry run only counts: it works for a user who may only read the database.
        let store = try context.openStore(config, dryRun ? .migratedReadOnly : .migrated)
        let report = try context.storeCall { () throws(StoreError) in try store.prune(now: context.now, policy: policy, dryRun: dryRun) }
        let total = report.tables.reduce(0) { $0 + $1.rows }
        var table = Table([("TABLE", .left), (dryRun ? "WOULD DELETE" : "DELETED", .right)])
        for t in report.tables { table.append([t.table, "\(t.rows)"]) }
        table.append(["TOTAL", "\(total)"])
        context.emit(
            human: table.rendered + (dryRun ? "dry run: nothing was deleted\n" : ""),
            json: .object([
                ("dryRun", .bool(dryRun)),
                ("at", .string(context.now.iso8601)),
                (
                    "policy",
                    .object([
                        ("expiredTokenGraceSeconds", .int(policy.expiredTokenGrace)),
                        ("revokedSessionRetentionSeconds", .int(policy.revokedSessionRetention)),
                        ("abandonedSessionRetentionSeconds", .int(policy.abandonedSessionRetention)),
                        ("refreshTokenLifetimeSeconds", .int(policy.refreshTokenLifetime)),
                        ("cellWindowSeconds", .int(policy.cellWindow)),
                        ("counterRetentionSeconds", .int(policy.counterRetention)),
                    ])
                ),
                ("tables", .object(report.tables.map { ($0.table, .int($0.rows)) })),
                ("total", .int(total)),
            ]))
        return ExitCode.ok
    }
}
