/// The kinds of secret the gateway hands out, each recognisable by its prefix.
public enum TokenKind: String, Sendable {
    case access
    case refresh

    /// `wta_` for access tokens, `wtr_` for refresh tokens.
    public var prefix: String { self == .access ? "wta_" : "wtr_" }
}
