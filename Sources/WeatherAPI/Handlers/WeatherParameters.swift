import WeatherCore

/// Validation of the weather query parameters (API.md): 400 `invalid_request` naming the parameter.
enum WeatherParameters {
    static func coordinates(_ r: Request) throws(HTTPError) -> (Double, Double) {
        (try decimal(r, "lat", -90...90), try decimal(r, "lon", -180...180))
    }

    static func decimal(_ r: Request, _ name: String, _ range: ClosedRange<Double>) throws(HTTPError) -> Double {
        guard let text = try r.queryValue(name) else { throw .invalidRequest("parameter \(name) is required") }
        guard let v = plainDecimal(text), range.contains(v), !(v.magnitude == range.upperBound && beyondBound(text, Int(range.upperBound))) else {
            throw .invalidRequest("parameter \(name) must be a decimal number in \(Int(range.lowerBound))...\(Int(range.upperBound))")
        }
        return v
    }

    /// Whether a plain decimal whose value rounded to the bound `bound` (90 or 180, either sign)
    /// is beyond it: a `Double` has about 16 digits, so `90.0000000000000000001` reads as 90. Its
    /// whole part equal to the bound and any digit but 0 after the dot say it is outside;
    /// `89.99999999999999999999` (a whole part below the bound, rounded up) is inside.
    static func beyondBound(_ text: String, _ bound: Int) -> Bool {
        var whole = 0, inFraction = false
        for c in text.utf8 {
            switch c {
            case UInt8(ascii: "."): inFraction = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                if !inFraction {
                    whole = min(whole * 10 + Int(c - 48), bound + 1)
                } else if c != UInt8(ascii: "0") {
                    return whole >= bound
                }
            default: continue  // the sign
            }
        }
        return whole > bound
    }

    /// `[+-]?[0-9]+(\.[0-9]+)?`, at most 24 bytes, as a `Double`; nil for anything else (`1e5`,
    /// `.5`, `5.`, `0x1p3`, `nan`, `inf`). One pass over the bytes: with at most 15 digits and 22
    /// decimals the value is the digits divided by a power of ten, both exact in a `Double`, so the
    /// one rounding is the division's, the same result `Double(text)` gives; longer text goes to it.
    static func plainDecimal(_ text: String) -> Double? {
        var text = text
        return text.withUTF8 { u -> Double? in
            guard !u.isEmpty, u.count <= 24 else { return nil }
            var i = 0
            let negative = u[0] == UInt8(ascii: "-")
            if negative || u[0] == UInt8(ascii: "+") { i = 1 }
            var mantissa: Int64 = 0
            var digits = 0, decimals = 0
            var dot = -1
            while i < u.count {
                let c = u[i]
                if c == UInt8(ascii: ".") {
                    guard dot < 0 else { return nil }
                    dot = i
                } else {
                    guard c >= 48, c <= 57 else { return nil }
                    digits += 1
                    if dot >= 0 { decimals += 1 }
                    if digits <= 18 { mantissa = mantissa * 10 + Int64(c - 48) }
                }
                i += 1
            }
            // Digits on both sides of a dot, and at least one digit.
            guard digits > 0, dot < 0 || (decimals > 0 && digits > decimals) else { return nil }
            guard digits <= 15, decimals <= 22 else {
                guard let v = Double(String(decoding: u, as: UTF8.self)), v.isFinite else { return nil }
                return v
            }
            let v = Double(mantissa) / Self.powersOfTen[decimals]
            return negative ? -v : v
        }
    }

    /// 10^0 ... 10^22, every one exact in a `Double`.
    private static let powersOfTen: [Double] = (0...22).map { n in (0..<n).reduce(1.0) { p, _ in p * 10 } }

    static func forecast(_ r: Request) throws(HTTPError) -> WeatherQuery {
        guard let text = try r.queryValue("days") else { return .forecast(days: 7) }
        guard text.utf8.count <= 2, text.utf8.allSatisfy({ (48...57).contains($0) }), let d = Int(text), (1...15).contains(d) else {
            throw .invalidRequest("parameter days must be a whole number in 1...15")
        }
        return .forecast(days: d)
    }

    /// A trip: `start <= end`, at most 15 days, from yesterday to a year from tomorrow (UTC
    /// dates; the traveller's own date may be a day behind or ahead of UTC's).
    static func trip(_ r: Request, today: LocalDate) throws(HTTPError) -> WeatherQuery {
        func date(_ name: String) throws(HTTPError) -> LocalDate {
            guard let text = try r.queryValue(name) else { throw .invalidRequest("parameter \(name) is required") }
            guard let d = LocalDate(text) else { throw .invalidRequest("parameter \(name) must be a date YYYY-MM-DD") }
            return d
        }
        let start = try date("start"), end = try date("end")
        guard start <= end else { throw .invalidRequest("parameter end must not be before start") }
        guard end.daysSinceEpoch - start.daysSinceEpoch < 15 else { throw .invalidRequest("parameter end must be at most 15 days after start, inclusive") }
        guard start >= today.adding(days: -1) else { throw .invalidRequest("parameter start must not be in the past") }
        guard end <= today.adding(days: 1).adding(years: 1) else { throw .invalidRequest("parameter end must not be more than one year ahead") }
        return .trip(start: start, end: end)
    }
}
