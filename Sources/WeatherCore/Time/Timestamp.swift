/// Seconds since the Unix epoch, UTC. The gateway's only notion of "now".
public struct Timestamp: Sendable, Hashable, Comparable {
    public var seconds: Int64

    public init(seconds: Int64) { self.seconds = seconds }

    public static func < (a: Timestamp, b: Timestamp) -> Bool { a.seconds < b.seconds }

    public func adding(seconds s: Int64) -> Timestamp { Timestamp(seconds: seconds + s) }

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

    /// Parses the wire format exactly; `nil` for anything else.
    public init?(iso8601 text: some StringProtocol) {
        let u = Array(text.utf8)
        guard u.count == 20, u[10] == UInt8(ascii: "T"), u[13] == UInt8(ascii: ":"),
              u[16] == UInt8(ascii: ":"), u[19] == UInt8(ascii: "Z"),
              let date = LocalDate(String(decoding: u[0..<10], as: UTF8.self)) else { return nil }
        func num(_ i: Int) -> Int? {
            guard (48...57).contains(u[i]), (48...57).contains(u[i + 1]) else { return nil }
            return Int(u[i] - 48) * 10 + Int(u[i + 1] - 48)
        }
        guard let h = num(11), let m = num(14), let s = num(17), h < 24, m < 60, s < 60 else { return nil }
        self.seconds = Int64(date.daysSinceEpoch) * 86_400 + Int64(h * 3600 + m * 60 + s)
    }
}

/// Where time comes from. Production reads the system clock; tests inject a fixed one.
public protocol Clock: Sendable {
    func now() -> Timestamp
}

/// Writes `n % 100` as two ASCII digits at `at`.
@inline(__always)
func writeTwoDigits(_ n: Int, into buf: UnsafeMutableBufferPointer<UInt8>, at i: Int) {
    buf[i] = UInt8(48 + n / 10 % 10)
    buf[i + 1] = UInt8(48 + n % 10)
}
