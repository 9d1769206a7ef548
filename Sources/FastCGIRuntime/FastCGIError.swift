/// A FastCGI set-up failure, for the start-up message.
public struct FastCGIError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}
