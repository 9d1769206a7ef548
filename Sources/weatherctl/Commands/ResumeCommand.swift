import WeatherCore
import WeatherProviders

/// `weatherctl resume [PROVIDER]`: ends the pause of a failing provider now, for every worker of
/// the machine, once its cause is fixed (a key replaced, a quota raised, a base URL corrected),
/// instead of waiting out a `Retry-After` of up to an hour.
enum ResumeCommand {
    static let spec = CommandSpec(
        name: "resume",
        summary: "end the pause of a failing provider now, for every worker (all paused ones by default)",
        arguments: ["PROVIDER"],
        optionalArguments: 1,
        details: """
            After a provider fails in a way no request could avoid (timeout, no connection, key
            refused, 429, 5xx, a redirect, a 200 whose body is not JSON) the workers skip it for a pause: 1, 2, 4 ... seconds up
            to WEATHER_PROVIDER_COOLDOWN, or as long as the provider's own Retry-After asks, up to
            an hour. weatherctl stats shows the pauses running. Once the cause is fixed, resume
            ends the pause of PROVIDER (caiyun or visualcrossing), or of every paused provider,
            in the page the workers share: the next request for an uncached cell calls it again.
            A pause kept only in one worker's memory (a store without the shared page, or a
            provider for which the page had no room) ends with that worker or its own pause.
            Prints each provider resumed and when its pause would have ended; exits 0 also when
            none was paused.
            """,
        run: run)

    static func run(_ args: ParsedArguments, _ context: CommandContext) throws(CLIError) -> Int32 {
        let config = try context.config()
        let known = GatewayConfig.knownProviders
        let names: [String]
        if let name = args.positionals.first {
            guard known.contains(name) else { throw .usage("unknown provider \(Terminal.quoted(name)) (\(known.joined(separator: " or ")))") }
            names = [name]
        } else {
            names = known
        }
        let store = try context.openStore(config, .migrated)
        guard let board = store.providerPauses else {
            throw .failure(
                "this database has no page the workers share pauses on (the `-writer` file beside it); pauses live in each worker's memory, and end with it")
        }
        // As `stats` reads them: the pauses running for workers with this configuration.
        let cooldowns = ProviderCooldowns(longest: config.providerCooldown, board: board)
        var resumed: [(String, ProviderCooldowns.Entry)] = []
        for name in names where board.pause(of: name) != nil {
            let running = cooldowns.pause(of: name, now: context.now)
            // The record goes whether or not its pause still runs: its failures in a row too,
            // as after a success.
            board.update(name) { _ in nil }
            if let running { resumed.append((name, running)) }
        }
        context.emit(
            human: resumed.isEmpty
                ? "no provider \(names.count == 1 ? names[0] + " " : "")was paused\n"
                : resumed.map { "resumed \($0.0) (its pause would have ended at \($0.1.until.iso8601); last: \($0.1.failure.summary))\n" }.joined(),
            json: .object([
                (
                    "resumed",
                    .array(
                        resumed.map { name, pause in
                            .object([("provider", .string(name)), ("until", .string(pause.until.iso8601)), ("lastFailure", .string(pause.failure.code))])
                        })
                )
            ]))
        return ExitCode.ok
    }
}
