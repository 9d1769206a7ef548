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
        return u.count == 47 && token.hasPrefix(kind.prefix) && isBase64URL(token, from: 4)
    }

    /// A session id is `aws_` plus 1...64 base64url characters.
    public static func isSessionId(_ id: String) -> Bool {
        let u = id.utf8
        return id.hasPrefix(IdentifierPrefix.session) && (5...68).contains(u.count) && isBase64URL(id, from: 4)
    }

    /// 8-4-4-4-12 hexadecimal digits, any case.
    public static func isUUID(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { $0.count == 36 && isUUID($0, at: 0) }
    }

    /// Whether a UUID (as `isUUID` reads one) lies anywhere in `text`: what may not be logged or
    /// echoed where an installation id could have been pasted (a request id, a command line).
    public static func containsUUID(_ text: UnsafeBufferPointer<UInt8>) -> Bool {
        guard text.count >= 36 else { return false }
        for start in 0...(text.count - 36) where isUUID(text, at: start) { return true }
        return false
    }

    /// The 36 bytes of `text` from `start` are 8-4-4-4-12 hexadecimal digits.
    static func isUUID(_ text: UnsafeBufferPointer<UInt8>, at start: Int) -> Bool {
        for i in 0..<36 {
            let c = text[start + i]
            if i == 8 || i == 13 || i == 18 || i == 23 {
                if c != UInt8(ascii: "-") { return false }
            } else if !((48...57).contains(c) || (97...102).contains(c) || (65...70).contains(c)) {
                return false
            }
        }
        return true
    }

    /// True when every byte of `text` from `offset` on is base64url (or, with `dot`, also `.`).
    /// One shift and mask per byte over the string's own UTF-8: this runs on every request (the
    /// token, the request id), where a per-byte closure over `utf8` cost 1,700 instructions.
    public static func isBase64URL(_ text: String, from offset: Int = 0, dot: Bool = false) -> Bool {
        // Bit n of `low` is byte n (0...63): `-`, `0`...`9`, and `.` with `dot`; of `high`, byte
        // 64 + n: `A`...`Z`, `_`, `a`...`z`.
        let low: UInt64 = 0x03FF_2000_0000_0000 | (dot ? 1 << 46 : 0)
        let high: UInt64 = 0x07FF_FFFE_87FF_FFFE
        var text = text
        return text.withUTF8 { bytes in
            guard offset <= bytes.count else { return false }
            for b in bytes[offset...] {
                let bits = b < 64 ? low >> UInt64(b) : b < 128 ? high >> UInt64(b - 64) : 0
                if bits & 1 == 0 { return false }
            }
            return true
        }
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
    public var hex: String { withUnsafeBytes(of: words) { Hex.encode($0) } }
}
