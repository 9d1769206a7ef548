/// Seconds since the Unix epoch, UTC. The gateway's only notion of "now".
public struct Timestamp: Sendable, Hashable, Comparable {
    public var seconds: Int64

    public init(seconds: Int64) { self.seconds = seconds }

    /// Epoch seconds from a provider's answer, when they are a time the wire format can carry
    /// (1970 up to the end of 9999); `nil` otherwise (not finite, negative, past 9999, or beyond
    /// `Int64`, which `Int64(_:)` would trap on), and the caller leaves the time out (`null`: the
    /// fetch time would be an invented observation).
    public init?(epochSeconds value: Double) {
        guard value.isFinite, value >= 0, value < 253_402_300_800 else { return nil }
        self.init(seconds: Int64(value))
    }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.seconds < b.seconds }

    /// This time moved by `s` seconds (earlier when negative).
    public func adding(seconds s: Int64) -> Timestamp { Timestamp(seconds: seconds + s) }

    /// How far ahead of a request's clock a time stored by another request may lie and still count
    /// as written now: a request's time is taken when it arrives, and the machine's clock may take
    /// a small step. Anything further ahead was written under a clock since set back
    /// (docs/decisions.md, "A clock set back").
    public static let slackSeconds: Int64 = 60

    /// The UTC calendar date of this instant.
    public var utcDate: LocalDate {
        LocalDate(daysSinceEpoch: Int((seconds >= 0 ? seconds : seconds - 86_399) / 86_400))
    }

    /// Wire and database format: ISO 8601 UTC, seconds precision, `Z` (`2026-06-03T20:00:00Z`).
    /// Written digit by digit into one 20-byte string: it runs several times per request.
    public var iso8601: String {
        let date = utcDate
        let secOfDay = Int(((seconds % 86_400) + 86_400) % 86_400)
        guard date.hasFourDigitYear else {
            func pad2(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
            return "\(date)T\(pad2(secOfDay / 3600)):\(pad2(secOfDay / 60 % 60)):\(pad2(secOfDay % 60))Z"
        }
        return String(unsafeUninitializedCapacity: 20) { buf in
            date.writeDigits(into: buf)
            buf[10] = UInt8(ascii: "T")
            writeTwoDigits(secOfDay / 3600, into: buf, at: 11)
            buf[13] = UInt8(ascii: ":")
            writeTwoDigits(secOfDay / 60 % 60, into: buf, at: 14)
            buf[16] = UInt8(ascii: ":")
            writeTwoDigits(secOfDay % 60, into: buf, at: 17)
            buf[19] = UInt8(ascii: "Z")
            return 20
        }
    }

    /// Parses the wire format exactly; `nil` for anything else. On bytes, without allocating:
    /// every authenticated request parses two of these.
    public init?(iso8601 text: some StringProtocol) {
        var text = String(text)
        guard let seconds = text.withUTF8({ Timestamp.parse($0) }) else { return nil }
        self.seconds = seconds
    }

    private static func parse(_ u: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard u.count == 20, u[4] == UInt8(ascii: "-"), u[7] == UInt8(ascii: "-"), u[10] == UInt8(ascii: "T"),
            u[13] == UInt8(ascii: ":"), u[16] == UInt8(ascii: ":"), u[19] == UInt8(ascii: "Z")
        else { return nil }
        func num(_ i: Int, _ width: Int) -> Int? {
            var n = 0
            for j in i..<(i + width) {
                guard u[j] >= 48 && u[j] <= 57 else { return nil }
                n = n * 10 + Int(u[j] - 48)
            }
            return n
        }
        guard let y = num(0, 4), let mo = num(5, 2), let d = num(8, 2), let date = LocalDate(year: y, month: mo, day: d),
            let h = num(11, 2), let m = num(14, 2), let s = num(17, 2), h < 24, m < 60, s < 60
        else { return nil }
        return Int64(date.daysSinceEpoch) * 86_400 + Int64(h * 3600 + m * 60 + s)
    }
}

/// Where time comes from. Production reads the system clock; tests inject a fixed one.
public protocol Clock: Sendable {
    /// The current time, to the second.
    func now() -> Timestamp
}

/// Writes `n % 100` as two ASCII digits at `at`.
@inline(__always)
func writeTwoDigits(_ n: Int, into buf: UnsafeMutableBufferPointer<UInt8>, at i: Int) {
    buf[i] = UInt8(48 + n / 10 % 10)
    buf[i + 1] = UInt8(48 + n % 10)
}
