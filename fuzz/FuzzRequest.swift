// libFuzzer target for the gateway's request-facing parsers: Request.parse (CGI parameters and
// body), JSONBody.strings of the session bodies (checked against JSONDecoder), JSONValue (provider answers, checked against
// JSONDecoder), WeatherParameters (coordinates, forecast,
// trip), and RecordWalk (the FastCGI records a worker's request screen follows). Built by fuzz/build.sh together with the production sources into one module, so the
// code under test is the shipped code, not a copy.
//
// Input layout (every byte sequence is a valid input):
//   byte 0   method selector      (GET, POST, lowercase, empty, missing, or the next 16 bytes raw)
//   byte 1   flags                bits 0-2 Content-Length mode, bits 3-4 Content-Type,
//                                 bit 5 path in SCRIPT_NAME+PATH_INFO too, bit 6 mount prefix /api,
//                                 bit 7 short body (readBody returns fewer bytes than asked)
//   rest     URI 0x1E QUERY_STRING 0x1E HEADERS 0x1E BODY
//            HEADERS: entries separated by 0x1F, each NAME=VALUE, passed as HTTP_NAME.
// Parameter values are decoded from bytes the way FastCGIServer does (UTF-8, repairing), except
// that NUL bytes are kept: a strict superset of what a web server can send.
//
// Invariants (a violation traps, which libFuzzer reports as a crash):
//   - no crash, no sanitizer report, no trap in any parser;
//   - every thrown HTTPError is a 4xx, and its JSON envelope decodes back to the same code;
//   - a parsed request has an A-Z method, a path without NUL or U+FFFD, a body exactly
//     CONTENT_LENGTH long and at most 4096 bytes; readBody is never asked for more than 4096,
//     except once for 4097 when a Transfer-Encoding comes without a length (read to its end);
//   - the session bodies only ever fail with 400 invalid_request or 415 unsupported_media_type;
//   - validated weather parameters are finite and in range, the range checked on the text too
//     (Decimal: a value a Double rounds onto a bound must not be beyond it); days in 1...15;
//     trips ordered and at most 15 days long;
//   - ReportSlice never traps on any body, and what it cuts is JSON.

// Foundation, not only FoundationEssentials: JSONSerialization is the second JSON oracle.
import Foundation

/// CreateSessionHandler's fields (SessionHandlers.swift) for JSONDecoder, the reference the
/// hand-written reader is checked against.
struct FuzzCreateBody: Decodable {
    var platform: String?
    var appVersion: String?
    var installationId: String?
}

/// SessionProof's fields, likewise.
struct FuzzSessionProof: Decodable {
    var anonymousSessionId: String?
    var refreshToken: String?
}

struct FuzzEnvelope: Decodable {
    struct Inner: Decodable { var code: String; var message: String }
    var error: Inner
}

@inline(never)
func fuzzCheck(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition {
        print("FUZZ INVARIANT VIOLATED: \(what())")
        fatalError("invariant: \(what())")
    }
}

func checkError(_ e: HTTPError, allowed: Set<Int>, _ stage: String) {
    fuzzCheck(allowed.contains(e.status), "\(stage): status \(e.status) \(e.code)")
    fuzzCheck(!e.code.isEmpty && e.code.utf8.allSatisfy { (97...122).contains($0) || $0 == 95 }, "\(stage): code \(e.code)")
    let r = e.response
    fuzzCheck(r.status == e.status, "\(stage): response status")
    let decoded = try? JSONDecoder().decode(FuzzEnvelope.self, from: Data(r.body))
    fuzzCheck(decoded?.error.code == e.code, "\(stage): envelope is not valid JSON: \(String(decoding: r.body, as: UTF8.self))")
    _ = r.cgiBytes()
}

func split(_ bytes: ArraySlice<UInt8>, on sep: UInt8, max: Int) -> [ArraySlice<UInt8>] {
    bytes.split(separator: sep, maxSplits: max, omittingEmptySubsequences: false)
}

func text(_ b: ArraySlice<UInt8>) -> String { String(decoding: b, as: UTF8.self) }

func fuzzOne(_ input: [UInt8]) {
    fuzzRecordWalk(input)
    guard input.count >= 2 else { return }
    let selector = input[0], flags = input[1]
    var rest = input[2...]
    var params: [String: String] = [:]

    switch selector % 8 {
    case 0, 1, 2: params["REQUEST_METHOD"] = "GET"
    case 3, 4: params["REQUEST_METHOD"] = "POST"
    case 5: params["REQUEST_METHOD"] = "post"
    case 6: params["REQUEST_METHOD"] = selector & 8 == 0 ? "" : "DELETE"
    default:
        let n = Swift.min(rest.count, Int(selector >> 3) % 20)
        params["REQUEST_METHOD"] = text(rest.prefix(n))
        rest = rest.dropFirst(n)
    }

    let parts = split(rest, on: 0x1E, max: 3)
    let uri = parts.count > 0 ? parts[0] : []
    let qs = parts.count > 1 ? parts[1] : []
    let hdrs = parts.count > 2 ? parts[2] : []
    let body = Array(parts.count > 3 ? parts[3] : [])
    fuzzProviders(body, selector: selector, trip: flags & 0x80 != 0)

    if !uri.isEmpty { params["REQUEST_URI"] = text(uri) }
    if !qs.isEmpty { params["QUERY_STRING"] = text(qs) }
    if flags & 0x20 != 0 {
        let path = text(uri).split(separator: "?", maxSplits: 1).first.map(String.init) ?? ""
        params["SCRIPT_NAME"] = "/weather.fcgi"
        params["PATH_INFO"] = path
    }
    for entry in split(hdrs, on: 0x1F, max: 64) where !entry.isEmpty {
        let kv = split(entry, on: UInt8(ascii: "="), max: 1)
        let name = text(kv[0]).uppercased().map { $0 == "-" ? "_" : $0 }
        params["HTTP_" + String(name)] = kv.count > 1 ? text(kv[1]) : ""
    }

    switch flags & 7 {
    case 0: break
    case 1, 2: params["CONTENT_LENGTH"] = String(body.count)
    case 3: params["CONTENT_LENGTH"] = String(body.count + 1 + Int(selector))
    case 4: params["CONTENT_LENGTH"] = "99999999999999999999999"
    case 5: params["CONTENT_LENGTH"] = "-\(body.count)"
    case 6: params["CONTENT_LENGTH"] = String(4096 + Int(selector))
    default: params["CONTENT_LENGTH"] = params["HTTP_CONTENT_LENGTH"] ?? " 12"
    }
    switch (flags >> 3) & 3 {
    case 0: params["CONTENT_TYPE"] = "application/json"
    case 1: params["CONTENT_TYPE"] = "Application/JSON; charset=utf-8"
    case 2: params["CONTENT_TYPE"] = params["HTTP_CONTENT_TYPE"] ?? "text/plain"
    default: break
    }
    params["REMOTE_ADDR"] = "127.0.0.1"
    let prefix = flags & 0x40 != 0 ? "/api" : ""
    let shortBody = flags & 0x80 != 0

    var asked: [Int] = []
    // A body without a length (a Transfer-Encoding, no CONTENT_LENGTH) is read to its end: one
    // byte past the limit at most, to tell a body over it.
    let lengthless = (params["CONTENT_LENGTH"] ?? "").isEmpty && !(params["HTTP_TRANSFER_ENCODING"] ?? "").isEmpty
    let askable = lengthless ? Request.maxBodyBytes + 1 : Request.maxBodyBytes
    let request: Request
    do {
        request = try Request.parse(params: CGIParameters(params), mountPrefix: prefix) { n in
            asked.append(n)
            let give = shortBody ? Swift.max(0, Swift.min(n, body.count) - 1) : Swift.min(n, body.count)
            return Array(body.prefix(give))
        }
    } catch {
        checkError(error, allowed: [400, 413], "Request.parse")
        fuzzCheck(asked.allSatisfy { $0 <= askable }, "readBody asked for \(asked)")
        return
    }
    fuzzCheck(asked.count <= 1 && asked.allSatisfy { $0 > 0 && $0 <= askable }, "readBody asked for \(asked)")
    fuzzCheck(!request.method.isEmpty && request.method.utf8.allSatisfy { (65...90).contains($0) }, "method \(request.method)")
    fuzzCheck(!request.path.contains("\0") && !request.path.contains("\u{FFFD}"), "path \(request.path.debugDescription)")
    fuzzCheck(request.body.count <= Request.maxBodyBytes, "body \(request.body.count) bytes")
    if let cl = params["CONTENT_LENGTH"], let n = Int(cl) { fuzzCheck(request.body.count == n, "body \(request.body.count) != CONTENT_LENGTH \(n)") }
    for item in request.query { fuzzCheck(!item.name.contains("\0") && !item.value.contains("\0"), "NUL in query") }

    // The session bodies (create, refresh/revoke), as the handlers read them. Whatever the
    // hand-written reader accepts, JSONDecoder must accept too, with the same values.
    do {
        let b = try JSONBody.strings(["platform", "appVersion", "installationId"], from: request)
        if let id = b[2], TokenSyntax.isUUID(id) { fuzzCheck(id.utf8.count == 36, "uuid length") }
        let d = try? JSONDecoder().decode(FuzzCreateBody.self, from: Data(request.body))
        fuzzCheck(d != nil && d!.platform == b[0] && d!.appVersion == b[1] && d!.installationId == b[2],
                  "create body read as \(b), JSONDecoder: \(String(describing: d))")
    } catch {
        checkError(error, allowed: [400, 415], "JSONBody create")
    }
    do {
        let p = try JSONBody.strings(["anonymousSessionId", "refreshToken"], from: request)
        if let id = p[0], TokenSyntax.isSessionId(id) { fuzzCheck(id.hasPrefix("aws_"), "session id") }
        if let t = p[1] { _ = TokenSyntax.isWellFormed(t, kind: .refresh) }
        let d = try? JSONDecoder().decode(FuzzSessionProof.self, from: Data(request.body))
        fuzzCheck(d != nil && d!.anonymousSessionId == p[0] && d!.refreshToken == p[1],
                  "proof body read as \(p), JSONDecoder: \(String(describing: d))")
    } catch {
        checkError(error, allowed: [400, 415], "JSONBody proof")
    }

    // Provider answers are read by JSONValue: whatever it accepts, JSONDecoder must accept too,
    // with the same tree (the body stands in for a provider's answer).
    // JSONDecoder refuses a zero with an exponent and no sign (`0e9`, `0E9`: its check that a
    // number that came out 0 was written as zero), which RFC 8259 allows and JSONValue reads as
    // 0 (JSONValueTests); for a document JSONDecoder refuses, JSONSerialization is the oracle.
    if let tree = try? JSONValue.parse(request.body) {
        let theirs = (try? JSONDecoder().decode(FuzzJSON.self, from: Data(request.body)))
            ?? (try? JSONSerialization.jsonObject(with: Data(request.body), options: [.fragmentsAllowed])).flatMap(FuzzJSON.init(serialized:))
        fuzzCheck(theirs.map { sameJSON(tree, $0) } ?? false, "JSONValue read \(tree), JSONDecoder: \(String(describing: theirs))")
    }

    // Cutting a stored report: any bytes, never a trap; a cut is JSON.
    for cut in [ReportSlice.forecast(request.body, days: 2),
                ReportSlice.trip(request.body, start: LocalDate(year: 2026, month: 11, day: 30)!, end: LocalDate(year: 2026, month: 12, day: 1)!)] {
        if let cut { fuzzCheck((try? JSONValue.parse(cut)) != nil, "ReportSlice cut something that is not JSON") }
    }

    // The weather parameters.
    do {
        let (lat, lon) = try WeatherParameters.coordinates(request)
        fuzzCheck(lat.isFinite && lon.isFinite && (-90...90).contains(lat) && (-180...180).contains(lon), "coordinates \(lat),\(lon)")
        for (name, bound) in [("lat", Decimal(90)), ("lon", Decimal(180))] {
            if let text = try? request.queryValue(name), let exact = Decimal(string: text, locale: Locale(identifier: "en_US_POSIX")) {
                fuzzCheck(exact.magnitude <= bound, "\(name)=\(text) accepted beyond \(bound)")
            }
        }
    } catch {
        checkError(error, allowed: [400], "coordinates")
    }
    do {
        if case .forecast(let d) = try WeatherParameters.forecast(request) {
            fuzzCheck((1...15).contains(d), "days \(d)")
        } else {
            fuzzCheck(false, "forecast returned a trip")
        }
    } catch {
        checkError(error, allowed: [400], "forecast")
    }
    let today = LocalDate(year: 2026, month: 11, day: 30)!
    do {
        if case .trip(let s, let e) = try WeatherParameters.trip(request, today: today) {
            fuzzCheck(s <= e && e.daysSinceEpoch - s.daysSinceEpoch < 15, "trip \(s)...\(e)")
            fuzzCheck(s >= today.adding(days: -1) && e <= today.adding(days: 1).adding(years: 1), "trip window \(s)...\(e)")
        } else {
            fuzzCheck(false, "trip returned a forecast")
        }
    } catch {
        checkError(error, allowed: [400], "trip")
    }
    // Duplicate parameters are refused, never resolved.
    for name in ["lat", "lon", "days", "start", "end"] {
        let n = request.query.filter { $0.name == name }.count
        do {
            let v = try request.queryValue(name)
            fuzzCheck(n <= 1 && (v == nil) == (n == 0), "queryValue(\(name)) with \(n) copies")
        } catch {
            fuzzCheck(n > 1, "queryValue(\(name)) threw with \(n) copies")
            checkError(error, allowed: [400], "queryValue")
        }
    }
}

/// Any JSON value, as JSONDecoder reads it.
indirect enum FuzzJSON: Decodable {
    case null, bool(Bool), number(Double), string(String), array([FuzzJSON]), object([String: FuzzJSON])

    init(from decoder: any Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() {
            self = .null
        } else if let b = try? c.decode(Bool.self) {
            self = .bool(b)
        } else if let d = try? c.decode(Double.self) {
            self = .number(d)
        } else if let s = try? c.decode(String.self) {
            self = .string(s)
        } else if let a = try? c.decode([FuzzJSON].self) {
            self = .array(a)
        } else {
            self = .object(try c.decode([String: FuzzJSON].self))
        }
    }
}

extension FuzzJSON {
    /// What JSONSerialization read (booleans are NSNumbers of type `c` there).
    init?(serialized x: Any) {
        switch x {
        case is NSNull: self = .null
        case let s as String: self = .string(s)
        case let a as [Any]:
            var items: [FuzzJSON] = []
            for e in a { guard let v = FuzzJSON(serialized: e) else { return nil }; items.append(v) }
            self = .array(items)
        case let o as [String: Any]:
            var members: [String: FuzzJSON] = [:]
            for (k, e) in o { guard let v = FuzzJSON(serialized: e) else { return nil }; members[k] = v }
            self = .object(members)
        case let n as NSNumber:
            self = String(cString: n.objCType) == "c" ? .bool(n.boolValue) : .number(n.doubleValue)
        default: return nil
        }
    }
}

/// The same document: numbers, strings, elements in order, and the same member names. A member
/// given twice is only checked for presence (JSONValueTests pins that the first one counts).
func sameJSON(_ v: JSONValue, _ f: FuzzJSON) -> Bool {
    switch (v, f) {
    case (.null, .null): return true
    case (.bool(let a), .bool(let b)): return a == b
    case (.number(let a), .number(let b)): return a == b
    case (.string(let a), .string(let b)): return a == b
    case (.array(let a), .array(let b)): return a.count == b.count && zip(a, b).allSatisfy { sameJSON($0, $1) }
    case (.object(let members), .object(let fo)):
        guard fo.count == Set(members.map(\.key)).count else { return false }
        return members.allSatisfy { m in
            guard let value = fo[m.key] else { return false }
            return members.filter({ $0.key == m.key }).count > 1 || sameJSON(m.value, value)
        }
    default: return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    fuzzOne(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// The FastCGI records of a request as the worker's screen walks them (`RecordWalk`), over the
/// raw input and over the input behind a responder's `FCGI_BEGIN_REQUEST`: the same bytes walked
/// at once and walked as they would arrive, a few at a time, give the same verdict and the same
/// count of body bytes; a whole request's walk never counts more body than there are bytes.
func fuzzRecordWalk(_ input: [UInt8]) {
    let begin: [UInt8] = [1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0]
    for bytes in [input, begin + input] {
        bytes.withUnsafeBytes { all in
            var atOnce = RecordWalk()
            let verdict = atOnce.walk(all)
            var piecewise = RecordWalk()
            let step = 1 + Int(input.first ?? 0) % 13
            var seen = 0
            var last = RecordWalk.Step.more
            while last == .more && seen < all.count {
                seen = min(all.count, seen + step)
                last = piecewise.walk(UnsafeRawBufferPointer(rebasing: all[0..<seen]))
            }
            fuzzCheck(last == verdict, "walked at once: \(verdict), piece by piece: \(last)")
            fuzzCheck(piecewise.bodyBytes == atOnce.bodyBytes && piecewise.headWhole == atOnce.headWhole, "the walks counted differently")
            fuzzCheck(atOnce.bodyBytes <= all.count && atOnce.walked <= all.count, "counted past the bytes")
        }
    }
}

/// The body as a provider's answer (up to -max_len, not the request's 4096), normalised by both
/// providers for a forecast of 1...15 days or a 3-day trip. Whatever they accept must be a report
/// the wire can carry: well-formed times, finite numbers, no more days than asked. (A
/// `server_time` beyond Int64 used to trap here.)
func fuzzProviders(_ body: [UInt8], selector: UInt8, trip: Bool) {
    let now = Timestamp(seconds: 1_796_004_191)
    let start = LocalDate(year: 2026, month: 11, day: 30)!
    let query: WeatherQuery = trip ? .trip(start: start, end: start.adding(days: 2)) : .forecast(days: 1 + Int(selector % 15))
    let asked = trip ? 3 : 1 + Int(selector % 15)
    let point = GridPoint(lat: 31.25, lon: 121.45)
    let answer = HTTPResult(status: 200, body: body)
    for report in [try? CaiyunProvider.report(from: answer, for: query, at: point, now: now),
                   try? VisualCrossingProvider.report(from: answer, for: query, at: point, now: now)] {
        guard let report else { continue }
        fuzzCheck(wireTime(report.fetchedAt), "fetchedAt \(report.fetchedAt)")
        fuzzCheck(report.daily.count <= asked, "\(report.daily.count) days for \(asked)")
        if let c = report.current {
            fuzzCheck(c.observedAt.map(wireTime) ?? true, "observedAt \(String(describing: c.observedAt))")
            for v in [c.temperatureC, c.apparentTemperatureC, c.humidity, c.windSpeedKph, c.precipitationMmPerHour] {
                fuzzCheck(v?.isFinite ?? true, "current value \(String(describing: v))")
            }
        }
        for d in report.daily {
            for v in [d.temperatureMinC, d.temperatureMaxC, d.precipitationProbability] {
                fuzzCheck(v?.isFinite ?? true, "daily value \(String(describing: v))")
            }
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ`, which the wire and the database use for every time.
func wireTime(_ text: String) -> Bool {
    let b = Array(text.utf8)
    guard b.count == 20, b[4] == 45, b[7] == 45, b[10] == 84, b[13] == 58, b[16] == 58, b[19] == 90 else { return false }
    return [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18].allSatisfy { (48...57).contains(b[$0]) }
}
