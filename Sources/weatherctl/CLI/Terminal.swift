import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Standard output and error as whole `write`s, so a line is never split by another process.
enum Terminal {
    /// A word from the command line, quoted for a message (at most `limit` characters), unless
    /// it may be a secret, since messages reach logs, the journal and scrollback: something
    /// shaped like an installation id (a UUID; the tool takes one only on standard input), a
    /// session token (`wta_`, `wtr_`), or any other word that is neither an option nor a session
    /// id and is 16 characters or more, or 8 or more mixing letters and digits (a provider key or
    /// the legacy token pasted in the wrong place: the legacy token may be short since session
    /// 35). Those are described, not repeated; a mistyped command or option still shows.
    static func quoted(_ text: some StringProtocol, limit: Int = 40) -> String {
        var word = String(text)
        if word.withUTF8(TokenSyntax.containsUUID) {
            return "(an installation id; give it with --installation-id - on standard input)"
        }
        if text.contains("wta_") || text.contains("wtr_") { return "(a token, not shown)" }
        let keyLike = text.count >= 16 || (text.count >= 8 && text.contains(where: \.isLetter) && text.contains(where: \.isNumber))
        if keyLike && !text.hasPrefix("-") && !text.hasPrefix("aws_") { return "(\(text.count) characters, not shown)" }
        return "\"\(text.prefix(limit))\""
    }

    static func out(_ text: String) { write(text, to: 1) }

    /// One line on standard error, prefixed with the program name.
    static func error(_ message: String) { write("weatherctl: " + message + "\n", to: 2) }

    static func write(_ text: String, to fd: Int32) {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += n
        }
    }
}
