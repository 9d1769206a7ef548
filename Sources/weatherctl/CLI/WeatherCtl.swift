import WeatherAPI
import WeatherCore

/// Finds the command a command line names, prints help, runs it and maps failures to exit codes.
enum WeatherCtl {
    static let commands: [CommandSpec] = [
        MigrateCommand.spec, SessionsCommand.show, SessionsCommand.list, RevokeCommand.spec,
        StatsCommand.spec, ResumeCommand.spec, PruneCommand.spec, CheckCommand.spec, AdoptHashKeyCommand.spec,
    ]

    /// Commands that only group others (`sessions`).
    static let groups: [String: String] = ["sessions": "inspect anonymous sessions (show, list)"]

    static var overview: String {
        let width = commands.map(\.name.count).max() ?? 0
        var text = """
            weatherctl: operate the closet weather gateway (database, sessions, statistics).

            Usage: weatherctl COMMAND [ARGUMENTS] [--json]
                   weatherctl help [COMMAND]
                   weatherctl --version

            Commands:

            """
        for c in commands {
            text += "  " + c.name + String(repeating: " ", count: width - c.name.count + 2) + c.summary + "\n"
        }
        text += """

            Configuration is read as the workers read it: the environment first, then the KEY=VALUE
            file named by WEATHER_CONFIG (default \(GatewayConfig.defaultConfigPath), else
            ../closet-weather-data/weather.conf beside the program, as on shared hosting).
            Times are UTC in the wire format (2026-06-03T20:00:00Z). Output never contains a token,
            a token hash, an installation id or a key. Human tables by default; --json for scripts.
            Exit status: 0 done, 1 failed (or a check failed), 64 bad command line.
            Run `weatherctl COMMAND --help` for one command.

            """
        return text
    }

    static func groupHelp(_ group: String) -> String {
        let members = commands.filter { $0.name.hasPrefix(group + " ") }
        var text = "Usage: weatherctl \(group) SUBCOMMAND ...\n\n\(groups[group] ?? "")\n\nSubcommands:\n"
        for c in members { text += "  " + c.usageLine + "\n      " + c.summary + "\n" }
        return text
    }

    /// Runs one command line (without the program name) and returns the exit status.
    static func main(_ arguments: [String], environment: [String: String], now: Timestamp) -> Int32 {
        do {
            return try dispatch(arguments, environment: environment, now: now)
        } catch {
            Terminal.error(error.message)
            return error.exitCode
        }
    }

    private static func dispatch(_ line: [String], environment: [String: String], now: Timestamp) throws(CLIError) -> Int32 {
        // `weatherctl --json stats` reads as `weatherctl stats --json`.
        let leading = line.prefix { $0 == "--json" }
        let arguments = line.count > leading.count ? Array(line.dropFirst(leading.count)) + leading : []
        guard let first = arguments.first else {
            throw .usage("missing command: migrate, sessions, revoke, stats, resume, prune, check or adopt-hash-key (see weatherctl --help)")
        }
        if first == "--help" || first == "-h" {
            Terminal.out(overview)
            return ExitCode.ok
        }
        if first == "--version" {
            // `weatherctl --version --json` (or `--json --version`) for scripts, as elsewhere.
            Terminal.out(
                arguments.contains("--json") ? JSONDocument.object([("version", .string(BuildInfo.version))]).rendered : "weatherctl \(BuildInfo.version)\n")
            return ExitCode.ok
        }
        if first == "help" {
            let topic = arguments.dropFirst().filter { !$0.hasPrefix("-") }
            if topic.isEmpty {
                Terminal.out(overview)
                return ExitCode.ok
            }
            let (command, _) = try resolve(Array(topic))
            Terminal.out(command.map(\.help) ?? groupHelp(topic[topic.startIndex]))
            return ExitCode.ok
        }
        let (resolved, rest) = try resolve(arguments)
        guard let command = resolved else {
            // A bare group: `weatherctl sessions --help` is help, `weatherctl sessions` is a usage error.
            if rest.contains("--help") || rest.contains("-h") {
                Terminal.out(groupHelp(first))
                return ExitCode.ok
            }
            let names = commands.filter { $0.name.hasPrefix(first + " ") }.map { String($0.name.dropFirst(first.count + 1)) }
            throw .usage("`\(first)` needs a subcommand: \(names.joined(separator: ", ")) (see weatherctl \(first) --help)")
        }
        let parsed = try ParsedArguments.parse(rest, for: command)
        if parsed.has("--help") {
            Terminal.out(command.help)
            return ExitCode.ok
        }
        let context = CommandContext(environment: environment, now: now, json: parsed.has("--json"))
        let changed = CLIError.failure(
            "the database changed while it was read (a worker opened it): what was shown may be wrong; run the command again as the service user")
        let status: Int32
        do {
            status = try command.run(parsed, context)
        } catch {
            // A file changing under a reader that takes no lock can also make the read fail.
            throw context.opened.changedWhileRead ? changed : error
        }
        if context.opened.changedWhileRead { throw changed }
        return status
    }

    /// The command named by the first words of `arguments`, and the words after it. `nil` with a
    /// group name alone (`sessions`).
    private static func resolve(_ arguments: [String]) throws(CLIError) -> (CommandSpec?, [String]) {
        let first = arguments[0]
        if let c = commands.first(where: { $0.name == first }) { return (c, Array(arguments.dropFirst())) }
        if groups[first] != nil {
            guard arguments.count > 1, !arguments[1].hasPrefix("-") else { return (nil, Array(arguments.dropFirst())) }
            let name = first + " " + arguments[1]
            guard let c = commands.first(where: { $0.name == name }) else {
                throw .usage("unknown subcommand \(Terminal.quoted(arguments[1])) of `\(first)` (see weatherctl \(first) --help)")
            }
            return (c, Array(arguments.dropFirst(2)))
        }
        throw .usage("unknown command \(Terminal.quoted(first)) (see weatherctl --help)")
    }
}
