/// The kinds of secret the gateway hands out, each recognisable by its prefix.
public enum TokenKind: String, Sendable {
    case access
    case refresh

    /// `wta_` for access tokens, `wtr_` for refresh tokens.
    public var prefix: String { self == .access ? "wta_" : "wtr_" }
}

/// Identifier prefixes: `aws_` sessions, `wst_` token rows.
public enum IdentifierPrefix {
    public static let session = "aws_"
    public static let tokenRow = "wst_"
}

/// Syntax checks for what clients send, before anything is looked up.
public enum TokenSyntax {
    /// A token is its prefix plus 43 base64url characters (256 bits). Anything else is refused
    /// without a database lookup.
    public static func isWellFormed(_ token: String, kind: TokenKind) -> Bool {
        let u = token.utf8
        guard u.count == 47, token.hasPrefix(kind.prefix) else { return false }
        return u.dropFirst(4).allSatisfy(isBase64URL)
    }

    /// A session id is `aws_` plus 1...64 base64url characters.
    public static func isSessionId(_ id: String) -> Bool {
        let u = id.utf8
        guard id.hasPrefix(IdentifierPrefix.session), (5...68).contains(u.count) else { return false }
        return u.dropFirst(4).allSatisfy(isBase64URL)
    }

    /// 8-4-4-4-12 hexadecimal digits, any case.
    public static func isUUID(_ text: String) -> Bool {
        let u = Array(text.utf8)
        guard u.count == 36 else { return false }
        for (i, c) in u.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((48...57).contains(c) || (97...102).contains(c) || (65...70).contains(c)) {
                return false
            }
        }
        return true
    }

    public static func isBase64URL(_ c: UInt8) -> Bool {
        (65...90).contains(c) || (97...122).contains(c) || (48...57).contains(c) || c == 45 || c == 95
    }
}

/// The lifetimes a freshly issued pair gets, computed from one `now`.
public struct TokenLifetimes: Sendable, Equatable {
    public var issuedAt: Timestamp
    public var accessExpiresAt: Timestamp
    public var refreshAfter: Timestamp
    public var refreshExpiresAt: Timestamp

    public init(now: Timestamp, policy: TokenPolicy) {
        issuedAt = now
        accessExpiresAt = now.adding(seconds: policy.accessTTL)
        refreshAfter = now.adding(seconds: policy.refreshAfter)
        refreshExpiresAt = now.adding(seconds: policy.refreshTTL)
    }

    /// The same lifetimes for a pair issued at `t` instead (a retried refresh answers with the
    /// deadlines of the pair it issued the first time).
    public func issued(at t: Timestamp) -> TokenLifetimes {
        let d = t.seconds - issuedAt.seconds
        var out = self
        out.issuedAt = t
        out.accessExpiresAt = accessExpiresAt.adding(seconds: d)
        out.refreshAfter = refreshAfter.adding(seconds: d)
        out.refreshExpiresAt = refreshExpiresAt.adding(seconds: d)
        return out
    }
}

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
    public var hex: String {
        withUnsafeBytes(of: words) { bytes in
            String(unsafeUninitializedCapacity: 64) { out in
                for (i, b) in bytes.enumerated() {
                    out[2 * i] = Self.digit(b >> 4)
                    out[2 * i + 1] = Self.digit(b & 0x0f)
                }
                return 64
            }
        }
    }

    private static func digit(_ n: UInt8) -> UInt8 { n < 10 ? 48 + n : 87 + n }
}
