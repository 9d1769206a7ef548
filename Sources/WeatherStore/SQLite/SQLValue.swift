/// A value to bind.
public enum SQLValue: Sendable {
    case text(String)
    case int(Int64)
    case blob([UInt8])
    case null
}

extension SQLValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
}
