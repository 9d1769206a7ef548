import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A blocking HTTP/1.1 client over a loopback socket, one connection per request. Small on
/// purpose: tests must see exactly the bytes the server sent, with no client-side caching.
struct HTTPResponse {
    var status: Int
    var headers: [String: String]  // lowercased names
    var body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
}

enum HTTPClient {
    static func send(
        port: Int, _ method: String, _ path: String, headers: [String: String] = [:], body: [UInt8]? = nil,
        rawRequest: [UInt8]? = nil, timeout: Double = 20
    ) throws -> HTTPResponse {
        let fd = try connectLoopback(port: port, timeout: timeout)
        defer { close(fd) }

        var request: [UInt8]
        if let rawRequest {
            request = rawRequest
        } else {
            var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            for (k, v) in headers { head += "\(k): \(v)\r\n" }
            if let body { head += "Content-Length: \(body.count)\r\n" }
            head += "\r\n"
            request = Array(head.utf8) + (body ?? [])
        }
        try sendAll(fd, request[...])
        let data = try receiveAll(fd)
        return try parse(data)
    }

    /// A TCP connection to 127.0.0.1:`port` whose reads time out after `timeout` seconds.
    static func connectLoopback(port: Int, timeout: Double) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw ClientError("connect to \(port)")
        }
        return fd
    }

    /// Writes every byte or throws.
    static func sendAll(_ fd: Int32, _ bytes: ArraySlice<UInt8>) throws {
        let a = Array(bytes)
        var sent = 0
        while sent < a.count {
            let n = a.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, a.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw ClientError("send") }
            sent += n
        }
    }

    /// Reads until the server closes the connection.
    static func receiveAll(_ fd: Int32) throws -> [UInt8] {
        var data: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = buf.withUnsafeMutableBytes { recv(fd, $0.baseAddress, 65536, 0) }
            if n < 0 { throw ClientError("recv timed out") }
            if n == 0 { return data }
            data += buf.prefix(n)
        }
    }

    static func parse(_ data: [UInt8]) throws -> HTTPResponse {
        guard let split = data.indices.first(where: { $0 + 3 < data.count && data[$0] == 13 && data[$0 + 1] == 10 && data[$0 + 2] == 13 && data[$0 + 3] == 10 })
        else {
            throw ClientError("no header end in \(data.count) bytes")
        }
        let head = String(decoding: data[..<split], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw ClientError("bad status line") }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let c = line.firstIndex(of: ":") else { continue }
            headers[line[..<c].lowercased()] = line[line.index(after: c)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(data[(split + 4)...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" { body = dechunk(body) }
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    static func dechunk(_ b: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < b.count {
            guard let lineEnd = (i..<b.count - 1).first(where: { b[$0] == 13 && b[$0 + 1] == 10 }) else { break }
            let size = Int(String(decoding: b[i..<lineEnd], as: UTF8.self).split(separator: ";")[0], radix: 16) ?? 0
            if size == 0 { break }
            out += b[(lineEnd + 2)..<min(b.count, lineEnd + 2 + size)]
            i = lineEnd + 2 + size + 2
        }
        return out
    }
}

struct ClientError: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Results gathered from concurrent requests.
final class Collector<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [T] = []
    func append(_ item: T) { lock.lock(); storage.append(item); lock.unlock() }
    var items: [T] { lock.lock(); defer { lock.unlock() }; return storage }
}

/// Runs `body(0..<n)` on n real threads (not a dispatch pool: requests block on sockets, and
/// concurrentPerform would only run as many at once as there are cores) and waits for all.
func parallel(_ n: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<n {
        group.enter()
        let t = Thread {
            body(i)
            group.leave()
        }
        t.stackSize = 1 << 20
        t.start()
    }
    group.wait()
}

/// The answers of `concurrently` and whether the requests really were in flight together.
struct ConcurrentAnswers {
    let answers: [HTTPResponse]
    /// Every request had been started (its thread about to connect) before the first answer came
    /// back. (`concurrentPerform`, used before, runs one request per core at a time: on a small
    /// machine they could go one by one.)
    let overlapped: Bool
}

/// Sends `n` requests at once, one thread each, released together once every thread is ready,
/// and returns the answers that arrived.
func concurrently(_ n: Int, port: Int, _ method: String, _ path: String, headers: [String: String] = [:], json: [UInt8]? = nil) -> ConcurrentAnswers {
    let out = Collector<HTTPResponse>()
    let sent = Collector<UInt64>(), answered = Collector<UInt64>()
    var h = headers
    if json != nil { h["Content-Type"] = "application/json" }
    let hh = h
    let ready = DispatchSemaphore(value: 0), go = DispatchSemaphore(value: 0)
    let released = DispatchGroup()
    released.enter()
    // A thread of its own: it blocks, and a blocked block on Dispatch's global queue holds one
    // of its few threads from every other test meanwhile.
    Thread {
        for _ in 0..<n { ready.wait() }
        for _ in 0..<n { go.signal() }
        released.leave()
    }.start()
    parallel(n) { _ in
        ready.signal()
        go.wait()
        sent.append(DispatchTime.now().uptimeNanoseconds)
        if let r = try? HTTPClient.send(port: port, method, path, headers: hh, body: json) { out.append(r) }
        answered.append(DispatchTime.now().uptimeNanoseconds)
    }
    released.wait()
    let lastSent = sent.items.max() ?? 0, firstAnswer = answered.items.min() ?? 0
    return ConcurrentAnswers(answers: out.items, overlapped: lastSent < firstAnswer)
}

/// The workers that answered `answers`: each answer's `X-Request-Id` (nginx's) found in the
/// gateway's `log` (a worker writes its line before it answers), and that line's `worker=`.
func workersAnswering(_ answers: [HTTPResponse], log: String) -> Set<Substring> {
    var workerOf: [Substring: Substring] = [:]
    for line in log.split(separator: "\n") {
        let fields = line.split(separator: " ")
        if let id = fields.first(where: { $0.hasPrefix("request_id=") }), let worker = fields.first(where: { $0.hasPrefix("worker=") }) {
            workerOf[id.dropFirst("request_id=".count)] = worker.dropFirst("worker=".count)
        }
    }
    return Set(answers.compactMap { $0.headers["x-request-id"].flatMap { workerOf[Substring($0)] } })
}

/// `GET path` eight at a time through `h` until at least two of its workers have answered (at
/// most ten rounds): each round's answers, and the workers that gave them.
func roundsUntilTwoWorkersAnswer(_ h: GatewayHarness, _ path: String, headers: [String: String] = [:]) -> (rounds: [[HTTPResponse]], workers: Set<Substring>) {
    var rounds: [[HTTPResponse]] = [], workers = Set<Substring>()
    for _ in 0..<10 where workers.count < 2 {
        let answers = concurrently(8, port: h.port, "GET", path, headers: headers).answers
        rounds.append(answers)
        workers.formUnion(workersAnswering(answers, log: h.log))
    }
    return (rounds, workers)
}

func jsonBytes(_ object: [String: Any]) -> [UInt8] { Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data()) }
