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

    /// True when every byte of `text` from `offset` on is base64url.
    /// One table look-up per byte over the string's own UTF-8: this runs on every request (the
    /// token, the request id), where a per-byte closure over `utf8` cost 1,700 instructions and a
    /// shift and mask per byte about 1,000 (callgrind, session 29).
    public static func isBase64URL(_ text: String, from offset: Int = 0) -> Bool {
        allBytes(of: text, from: offset, in: 1)
    }

    /// True when every byte of `text` is base64url, `.` or `@`: what a web server's request id may
    /// hold. nginx's are hex digits; Apache's `UNIQUE_ID` (mod_unique_id) is base64url in recent
    /// 2.4 releases (Debian 12's), but older ones, which shared hosts still run, write `@` and `-`
    /// for the last two digits, so about a third of their ids hold an `@` (session 30, a contract
    /// audit: they were refused and replaced, and the two logs no longer joined).
    public static func isRequestIdText(_ text: String) -> Bool {
        allBytes(of: text, from: 0, in: 2)
    }

    private static func allBytes(of text: String, from offset: Int, in mask: UInt8) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            guard offset <= bytes.count else { return false }
            return base64URLBytes.withUnsafeBufferPointer { table in
                var i = offset
                while i < bytes.count {
                    if table[Int(bytes[i])] & mask == 0 { return false }
                    i += 1
                }
                return true
            }
        }
    }

    /// For each byte value: 3 for a base64url character (`A`–`Z`, `a`–`z`, `0`–`9`, `-`, `_`),
    /// 2 for `.` and `@` (request ids only), 0 for anything else.
    static let base64URLBytes: [UInt8] = (0..<256).map { b in
        switch UInt8(b) {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            return 3
        case UInt8(ascii: "."), UInt8(ascii: "@"): return 2
        default: return 0
        }
    }
}
