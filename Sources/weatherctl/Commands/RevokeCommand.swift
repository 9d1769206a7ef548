import WeatherCore

/// `weatherctl revoke`: ends one session, or every active session of one app installation. The
/// revocation moves the shared revocation generation, which makes every worker drop the grants it
/// keeps, so the next request with any of its tokens gets 401.
enum RevokeCommand {
    static let spec = CommandSpec(
        name: "revoke",
        summary: "revoke a session, or every active session of an installation",
        arguments: ["SESSION_ID"],
        optionalArguments: 1,
        options: [
            OptionSpec(
                name: "--installation-id", value: "UUID", help: "revoke every active session of this app installation (`-`: read the UUID from standard input)")
        ],
        details: """
            Give either SESSION_ID or --installation-id. The session is marked revoked with the
            time, and every token of it is revoked; the next request presenting any of them is
            refused with 401. For an installation, its id is hashed with the gateway's key exactly
            as the workers hash it; only the hash is looked up. Revoking a revoked session (or an
            installation whose sessions are all revoked) is not an error and announces the
            revocation to the running workers again: if this command warned that it could not
            tell them, run it again as the service's user. An unknown session id is an error
            (exit 1).
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let sessionId = try spec.argument(0, in: args)
        if sessionId != nil && args.value("--installation-id") != nil {  // before reading standard input
            throw .usage("`revoke` takes SESSION_ID or --installation-id, not both")
        }
        let uuid = try context.installationId(args)
        switch (sessionId, uuid) {
        case (let id?, nil): return try revokeSession(id, context)
        case (nil, let uuid?): return try revokeInstallation(uuid, context)
        case (nil, nil): throw .usage("`revoke` needs SESSION_ID or --installation-id UUID (see weatherctl revoke --help)")
        case (.some, .some): throw .usage("`revoke` takes SESSION_ID or --installation-id, not both")
        }
    }

    /// Workers keep the grants they hold until a revocation moves the generation on the database's
    /// `-writer` page; a weatherctl that cannot open that page must say what that means.
    static func warnIfWorkersCannotHear(_ store: any OperatorStore) {
        guard !store.revocationsReachWorkers else { return }
        Terminal.error(
            "warning: cannot open the database's -writer file; running workers may accept the revoked tokens until they restart (run weatherctl as the service's user; if it is that user, the file's mode or owner keeps it out: weatherctl check, file modes)"
        )
    }

    static func revokeSession(_ id: String, _ context: CommandContext) throws(CLIError) -> Int32 {
        guard TokenSyntax.isSessionId(id) else { throw .usage("\(Terminal.quoted(id)) is not a session id (aws_...)") }
        let store = try context.openStore(try context.config())
        guard let before = try context.storeCall({ () throws(StoreError) in try store.session(id: id, now: context.now) }) else {
            throw .failure("no session \(id)")
        }
        let wasRevoked = before.summary.status == SessionStatus.revoked.rawValue
        // Also when it was revoked already: the revocation is announced to the workers again,
        // which is how a revocation they missed (made where the -writer page could not be opened)
        // reaches them, by running this again as the service's user.
        guard try context.storeCall({ () throws(StoreError) in try store.revokeSession(id: id, now: context.now) }) else {
            throw .failure("no session \(id)")
        }
        warnIfWorkersCannotHear(store)
        context.emit(
            human: wasRevoked ? "session \(id) was already revoked\n" : "revoked session \(id)\n",
            json: .object([
                ("revoked", .array(wasRevoked ? [] : [.string(id)])),
                ("alreadyRevoked", .array(wasRevoked ? [.string(id)] : [])),
                ("count", .int(wasRevoked ? 0 : 1)),
                ("workersNotified", .bool(store.revocationsReachWorkers)),
            ]))
        return ExitCode.ok
    }

    static func revokeInstallation(_ uuid: String, _ context: CommandContext) throws(CLIError) -> Int32 {
        guard TokenSyntax.isUUID(uuid) else { throw .usage("--installation-id must be a UUID (8-4-4-4-12 hex digits)") }
        let config = try context.config()
        let store = try context.openStore(config)
        let hash = try context.installationHash(uuid, config, store: store)
        let earlier = try context.storeCall { () throws(StoreError) in
            try store.sessions(SessionFilter(status: .revoked, installationIdHash: hash, limit: 100_000)).map(\.id)
        }
        let ids = try context.storeCall { () throws(StoreError) in try store.revokeInstallation(hash: hash, now: context.now) }
        // Nothing at all under that id fails, as an unknown session id does: a mistyped UUID, or a
        // database restored without its `hash.key`, must not pass for a privacy request done.
        if ids.isEmpty && earlier.isEmpty {
            throw .failure("no session of that installation (never seen, pruned, or the hash key is not the one its sessions were stored with)")
        }
        // Sessions revoked earlier: announced again, as for a single session.
        if ids.isEmpty && !earlier.isEmpty { store.announceRevocations() }
        if !ids.isEmpty || !earlier.isEmpty { warnIfWorkersCannotHear(store) }
        let human =
            ids.isEmpty
            ? "no active session of that installation\n"
            : ids.map { "revoked session \($0)\n" }.joined() + "\(ids.count) session(s) revoked\n"
        context.emit(
            human: human,
            json: .object([
                ("revoked", .array(ids.map(JSONDocument.string))),
                ("alreadyRevoked", .array(earlier.map(JSONDocument.string))),
                ("count", .int(ids.count)),
                ("workersNotified", .bool(store.revocationsReachWorkers)),
            ]))
        return ExitCode.ok
    }
}
