import WeatherCore

/// Validation of the weather query parameters (API.md): 400 `invalid_request` naming the parameter.
enum WeatherParameters {
    static func coordinates(_ r: Request) throws(HTTPError) -> (Double, Double) {
        (try decimal(r, "lat", -90...90), try decimal(r, "lon", -180...180))
    }

    static func decimal(_ r: Request, _ name: String, _ range: ClosedRange<Double>) throws(HTTPError) -> Double {
        guard let text = try r.queryValue(name) else { throw .invalidRequest("parameter \(name) is required") }
        let u = Array(text.utf8)
        let digits = u.drop { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "+") }
        guard u.count <= 24, u.count - digits.count <= 1, !digits.isEmpty,
              digits.allSatisfy({ (48...57).contains($0) || $0 == UInt8(ascii: ".") }),
              digits.filter({ $0 == UInt8(ascii: ".") }).count <= 1,
              digits.first != UInt8(ascii: "."), digits.last != UInt8(ascii: "."),
              let v = Double(text), v.isFinite, range.contains(v) else {
            throw .invalidRequest("parameter \(name) must be a decimal number in \(Int(range.lowerBound))...\(Int(range.upperBound))")
        }
        return v
    }

    static func forecast(_ r: Request) throws(HTTPError) -> WeatherQuery {
        guard let text = try r.queryValue("days") else { return .forecast(days: 7) }
        guard text.utf8.count <= 2, text.utf8.allSatisfy({ (48...57).contains($0) }), let d = Int(text), (1...15).contains(d) else {
            throw .invalidRequest("parameter days must be a whole number in 1...15")
        }
        return .forecast(days: d)
    }

    /// A trip: `start <= end`, at most 15 days, from yesterday (UTC; some zones are a day behind) to one year ahead.
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
        guard end <= today.adding(days: 366) else { throw .invalidRequest("parameter end must not be more than one year ahead") }
        return .trip(start: start, end: end)
    }
}
