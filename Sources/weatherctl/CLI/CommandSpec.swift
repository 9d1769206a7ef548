/// One `weatherctl` command: what it is called, what it takes, and what it does.
struct CommandSpec: Sendable {
    /// `migrate`, `sessions list`, ...
    var name: String
    /// One line for the command list.
    var summary: String
    /// Positional arguments by name (`SESSION_ID`); `optionalArguments` of them may be left out.
    var arguments: [String] = []
    var optionalArguments: Int = 0
    var options: [OptionSpec] = []
    /// Paragraphs after the usage line: what it does, what it prints.
    var details: String
    var run: @Sendable (ParsedArguments, CommandContext) throws(CLIError) -> Int32

    var usageLine: String {
        var parts = ["weatherctl", name]
        for (i, a) in arguments.enumerated() {
            parts.append(i >= arguments.count - optionalArguments ? "[\(a)]" : a)
        }
        for o in options { parts.append("[\(o.name)\(o.value.map { " " + $0 } ?? "")]") }
        parts.append("[--json]")
        return parts.joined(separator: " ")
    }

    var help: String {
        let all = options + [OptionSpec.json, OptionSpec.help]
        let labels = all.map { $0.name + ($0.value.map { " " + $0 } ?? "") }
        let width = labels.map(\.count).max() ?? 0
        var text = "Usage: \(usageLine)\n\n\(summary)\n"
        if !details.isEmpty { text += "\n\(details)\n" }
        text += "\nOptions:\n"
        for (label, o) in zip(labels, all) {
            text += "  " + label + String(repeating: " ", count: width - label.count + 2) + o.help + "\n"
        }
        text += "\nExit status: 0 done, 1 failed, 64 bad command line.\n"
        return text
    }

    /// The positional `index`, or a usage error naming it.
    func argument(_ index: Int, in parsed: ParsedArguments) throws(CLIError) -> String? {
        if index < parsed.positionals.count { return parsed.positionals[index] }
        if index >= arguments.count - optionalArguments { return nil }
        throw .usage("`\(name)` needs \(arguments[index]) (see weatherctl \(name) --help)")
    }
}
