import WeatherCore

/// `weatherctl sessions show|list`: what operators may know about anonymous sessions. Never a
/// token, a token hash or an installation id; only the first characters of the installation hash.
enum SessionsCommand {
    static let show = CommandSpec(
        name: "sessions show",
        summary: "show one session and its tokens counted by type and state",
        arguments: ["SESSION_ID"],
        details: """
            Prints the session's platform, app version, status, times, the first characters of its
            installation hash (with how many sessions that installation has), and its access and
            refresh tokens counted as live, expired or revoked. Refresh tokens retired by rotation
            count as revoked. Exits 1 when there is no such session.
            """,
        run: runShow)

    static let list = CommandSpec(
        name: "sessions list",
        summary: "list sessions, newest first",
        options: [
            OptionSpec(name: "--status", value: "active|revoked", help: "only sessions in this state"),
            OptionSpec(name: "--limit", value: "N", help: "at most N sessions (1-100000, default 50)"),
            OptionSpec(name: "--installation-id", value: "UUID", help: "only sessions of this app installation (`-`: read the UUID from standard input)"),
        ],
        details: """
            The installation id is hashed with the gateway's key, exactly as the workers hash it,
            and only the hash is looked up. INSTALLATION shows the first characters of that hash.
            """,
        run: runList)

    static func runShow(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let id = try show.argument(0, in: args) ?? ""
        guard TokenSyntax.isSessionId(id) else { throw .usage("\(Terminal.quoted(id)) is not a session id (aws_...)") }
        let store = try context.openStore(try context.config(forReading: true), .migratedReadOnly)
        guard let detail = try context.storeCall({ () throws(StoreError) in try store.session(id: id, now: context.now) }) else {
            throw .failure("no session \(id)")
        }
        let s = detail.summary
        var tokens = Table([("TOKENS", .left), ("LIVE", .right), ("EXPIRED", .right), ("REVOKED", .right)])
        for t in detail.tokens { tokens.append([t.type.rawValue, "\(t.live)", "\(t.expired)", "\(t.revoked)"]) }
        let human =
            keyValueLines([
                ("id", s.id),
                ("platform", s.platform),
                ("app_version", s.appVersion ?? "-"),
                ("status", s.status),
                ("installation", "\(s.installationHashPrefix)… (hash prefix; \(detail.sessionsOfInstallation) session(s))"),
                ("created_at", s.createdAt.cell),
                ("last_seen_at", s.lastSeenAt.cell),
                ("revoked_at", s.revokedAt.cell),
            ]) + "\n" + tokens.rendered
        var fields = summaryJSON(s)
        fields.append(("sessionsOfInstallation", .int(detail.sessionsOfInstallation)))
        fields.append(
            (
                "tokens",
                .object(
                    detail.tokens.map { t in
                        (t.type.rawValue, .object([("live", .int(t.live)), ("expired", .int(t.expired)), ("revoked", .int(t.revoked))]))
                    })
            ))
        context.emit(human: human, json: .object(fields))
        return ExitCode.ok
    }

    static func runList(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        var filter = SessionFilter()
        if let text = args.value("--status") {
            guard let status = SessionStatus(rawValue: text) else { throw .usage("--status must be active or revoked, got \(Terminal.quoted(text))") }
            filter.status = status
        }
        filter.limit = try args.integer("--limit", in: 1...100_000) ?? 50
        let config = try context.config(forReading: true)
        let uuid = try context.installationId(args)
        if let uuid, !TokenSyntax.isUUID(uuid) { throw .usage("--installation-id must be a UUID (8-4-4-4-12 hex digits)") }
        let store = try context.openStore(config, .migratedReadOnly)
        if let uuid { filter.installationIdHash = try context.installationHash(uuid, config, store: store) }
        let sessions = try context.storeCall { () throws(StoreError) in try store.sessions(filter) }
        var table = Table([
            ("ID", .left), ("PLATFORM", .left), ("VERSION", .left), ("STATUS", .left), ("CREATED", .left),
            ("LAST SEEN", .left), ("REVOKED", .left), ("INSTALLATION", .left),
        ])
        for s in sessions {
            table.append([s.id, s.platform, s.appVersion ?? "-", s.status, s.createdAt.cell, s.lastSeenAt.cell, s.revokedAt.cell, s.installationHashPrefix])
        }
        let footer = "\(sessions.count) session(s)" + (sessions.count == filter.limit ? " (limit reached; use --limit for more)" : "") + "\n"
        context.emit(
            human: (sessions.isEmpty ? "" : table.rendered) + footer,
            json: .object([("count", .int(sessions.count)), ("sessions", .array(sessions.map { .object(summaryJSON($0)) }))]))
        return ExitCode.ok
    }

    /// The fields both commands print for a session.
    static func summaryJSON(_ s: SessionSummary) -> [(String, JSONDocument)] {
        [
            ("id", .string(s.id)),
            ("platform", .string(s.platform)),
            ("appVersion", .optional(s.appVersion)),
            ("status", .string(s.status)),
            ("createdAt", s.createdAt.json),
            ("lastSeenAt", s.lastSeenAt.json),
            ("revokedAt", s.revokedAt.json),
            ("installationHashPrefix", .string(s.installationHashPrefix)),
        ]
    }
}
