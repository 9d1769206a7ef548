/// One `--option` a command accepts; `value` names its argument (`N`, `UUID`), `nil` for a switch.
struct OptionSpec: Sendable {
    var name: String
    var value: String?
    var help: String

    /// Accepted by every command.
    static let json = OptionSpec(name: "--json", value: nil, help: "print one JSON document on standard output")
    static let help = OptionSpec(name: "--help", value: nil, help: "show this help (also -h)")
}
