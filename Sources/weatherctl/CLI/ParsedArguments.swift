/// A command line split into positionals, switches and valued options, checked against a spec.
struct ParsedArguments {
    var positionals: [String] = []
    var switches: Set<String> = []
    var values: [String: String] = [:]

    func has(_ name: String) -> Bool { switches.contains(name) }
    func value(_ name: String) -> String? { values[name] }

    /// Parses `arguments` for `command`. `--help` anywhere before `--` wins, so help works even on
    /// a line that is otherwise wrong. An option given twice is refused: which of the two was
    /// meant is not for the tool to guess.
    static func parse(_ arguments: [String], for command: CommandSpec) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments()
        if arguments.prefix(while: { $0 != "--" }).contains(where: { $0 == "--help" || $0 == "-h" }) {
            parsed.switches.insert("--help")
            return parsed
        }
        let specs = command.options + [OptionSpec.json, OptionSpec.help]
        var i = 0
        var onlyPositionals = false
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositionals || !arg.hasPrefix("-") || arg == "-" {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            let name = arg.split(separator: "=", maxSplits: 1).first.map(String.init) ?? arg
            guard let spec = specs.first(where: { $0.name == name }) else {
                throw .usage("unknown option \(Terminal.quoted(name)) for `\(command.name)` (see weatherctl \(command.name) --help)")
            }
            let inline: String? = arg.contains("=") ? String(arg[arg.index(after: arg.firstIndex(of: "=")!)...]) : nil
            guard parsed.values[name] == nil && !parsed.switches.contains(name) else { throw .usage("\(name) is given more than once") }
            if let valueName = spec.value {
                if let inline {
                    parsed.values[name] = inline
                } else if i < arguments.count {
                    parsed.values[name] = arguments[i]
                    i += 1
                } else {
                    throw .usage("\(name) needs a value (\(valueName))")
                }
            } else {
                guard inline == nil else { throw .usage("\(name) takes no value") }
                parsed.switches.insert(name)
            }
        }
        if parsed.positionals.count > command.arguments.count {
            let extra = parsed.positionals[command.arguments.count]
            throw .usage("unexpected argument \(Terminal.quoted(extra, limit: 60)) for `\(command.name)`")
        }
        return parsed
    }

    /// A whole number in `range` given as `name`, or `nil` when the option is absent.
    func integer(_ name: String, in range: ClosedRange<Int>) throws(CLIError) -> Int? {
        guard let text = values[name] else { return nil }
        guard text.utf8.allSatisfy({ (48...57).contains($0) }), let n = Int(text), range.contains(n) else {
            throw .usage("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), got \(Terminal.quoted(text))")
        }
        return n
    }
}
