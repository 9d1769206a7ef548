/// The SHA-256 of a token, the key a worker keeps access grants under (`GatewayStore.accessGrant`).
/// Four words instead of the 64-character hex string that `token_hash` stores: a cached grant is
/// then found without building, hashing and comparing a heap-allocated string on every request,
/// and each of the thousands kept costs 32 bytes inline instead of a string of its own.
public struct TokenDigest: Hashable, Sendable {
    /// The digest's 32 bytes in order, as the memory of four words.
    public let words: (UInt64, UInt64, UInt64, UInt64)

    public init(words: (UInt64, UInt64, UInt64, UInt64)) { self.words = words }

    public static func == (a: TokenDigest, b: TokenDigest) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
        hasher.combine(words.3)
    }

    /// Lowercase hex of the 32 bytes: the `token_hash` column's form.
    public var hex: String { withUnsafeBytes(of: words) { Hex.encode($0) } }
}
