import WeatherAPI
import WeatherCore

/// `weatherctl adopt-hash-key`: records the workers' present hash key as the database's, once a
/// lost key was replaced on purpose; the workers refuse to start on a key the database does not
/// record (`Bootstrap.verifyHashKey`).
enum AdoptHashKeyCommand {
    static let spec = CommandSpec(
        name: "adopt-hash-key",
        summary: "record the present hash key as this database's, after a lost one was replaced on purpose",
        details: """
            The database records which hash key its installation-id hashes were made with (a
            fingerprint, never the key). Where it holds sessions, workers whose key is another
            refuse to start: a restore beside the wrong hash.key, or a WEATHER_HASH_KEY that
            differs between hosts, would otherwise match no installation id and take refresh
            retries for replays. Put back the right key when you have it. When it is lost for
            good and a new one was made on purpose (INSTALL.md, "A lost hash key"), this records
            the new key in its place; then restart every worker. Sessions go on working, but
            --installation-id no longer finds the sessions created under the old key. Prints
            what it did (recorded, replaced, or unchanged when the key was already the one
            recorded).
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let config = try context.config()
        let key = try context.hashKey(config)
        let store = try context.openStore(config)
        let fingerprint = Bootstrap.fingerprint(ofHashKey: key)
        let before = try context.storeCall { () throws(StoreError) in try store.recordedHashKey() }
        if before?.fingerprint != fingerprint {
            _ = try context.storeCall { () throws(StoreError) in
                try store.recordHashKey(fingerprint: fingerprint, when: .always, now: context.now)
            }
        }
        let outcome = before == nil ? "recorded" : before?.fingerprint == fingerprint ? "unchanged" : "replaced"
        let human =
            switch outcome {
            case "replaced":
                "replaced the recorded hash key (recorded \(before?.recordedAt.iso8601 ?? "")) with the present one: restart every worker; --installation-id now finds the sessions whose installation ids were hashed with the present key, and no others\n"
            case "recorded": "recorded the present hash key (none was recorded)\n"
            default: "the present hash key is already the one recorded\n"
            }
        context.emit(human: human, json: .object([("hashKey", .string(outcome))]))
        return ExitCode.ok
    }
}
