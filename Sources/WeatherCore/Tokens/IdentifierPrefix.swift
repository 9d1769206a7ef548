/// Identifier prefixes: `aws_` sessions, `wst_` token rows.
public enum IdentifierPrefix {
    public static let session = "aws_"
    public static let tokenRow = "wst_"
}
