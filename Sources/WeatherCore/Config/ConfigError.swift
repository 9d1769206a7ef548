/// A configuration value that cannot be used. Start-up stops with `description`, which names the variable.
public struct ConfigError: Error, Equatable, CustomStringConvertible {
    public let variable: String
    public let problem: String
    public init(variable: String, problem: String) {
        self.variable = variable
        self.problem = problem
    }
    public var description: String { "configuration: \(variable) \(problem)" }
}
