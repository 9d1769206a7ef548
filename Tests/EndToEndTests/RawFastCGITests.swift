import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Records written to a worker's socket directly, as anything that can reach the socket could
/// (not only the web server): what libfcgi would read badly never reaches it (`RequestScreen`).
/// One worker without a supervisor, so a worker that dies stays dead.
@Suite struct RawFastCGITests {
    /// An `FCGI_GET_VALUES` record (request id 0) naming `FCGI_MPXS_CONNS` four times: 72 bytes of
    /// answer in libfcgi's 64-byte stack buffer.
    static let getValues: [UInt8] = {
        let name = Array("FCGI_MPXS_CONNS".utf8)
        let pairs = Array(repeating: [UInt8(name.count), 0] + name, count: 4).flatMap { $0 }
        return [1, 9, 0, 0, 0, UInt8(pairs.count), 0, 0] + pairs
    }()

    /// `bytes` written to the worker's socket get no answer, their connection is closed, and
    /// the worker lives.
    static func expectDroppedUnread(_ bytes: [UInt8], by h: GatewayHarness, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let peer = try RawPeer(h.socketPath)
        try peer.send(bytes)
        #expect(peer.endsWithin(seconds: 3), "\(what): the connection was kept", sourceLocation: sourceLocation)
        #expect(peer.received.isEmpty, "\(what): answered \(peer.received.prefix(16))", sourceLocation: sourceLocation)
        #expect(h.app?.isRunning == true, "\(what): the worker died", sourceLocation: sourceLocation)
    }

    /// libfcgi answers `FCGI_GET_VALUES` in a 64-byte stack buffer without a bound: a record
    /// naming `FCGI_MPXS_CONNS` four times killed the worker ("stack smashing detected").
    @Test func aManagementRecordIsDroppedUnread() throws {
        let h = try GatewayHarness(workers: 1)
        let getValues = Self.getValues
        // Alone, and after a whole request of another id than the one libfcgi serves (it skips
        // those records and reads on).
        let begin: [UInt8] = [0, 1, 0, 0, 0, 0, 0, 0]
        let behindAnotherRequest =
            FastCGIExchange.record(1, begin) + [1, 1, 0, 2, 0, 8, 0, 0] + begin + [1, 4, 0, 2, 0, 0, 0, 0] + [1, 5, 0, 2, 0, 0, 0, 0] + getValues
        try Self.expectDroppedUnread(getValues, by: h, "alone")
        try Self.expectDroppedUnread(behindAnotherRequest, by: h, "behind a request of another id")
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 5).status == 200)
    }

    /// A kept parameter is matched on its exact bytes: a name one byte longer, shorter or
    /// different (even in case) is never taken for it. The request id shows which: echoed when
    /// it came under its own name, the worker's own otherwise.
    @Test func onlyTheExactNamesOfTheKeptParametersReachTheGateway() throws {
        let h = try GatewayHarness(workers: 1)
        func echoedId(under name: String) throws -> Bool {
            let peer = try RawPeer(h.socketPath)
            let params = ["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health", "REMOTE_ADDR": "127.0.0.1", name: "raw-id-0123"]
            try peer.send(
                FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + FastCGIExchange.record(4, FastCGIExchange.params(params))
                    + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, []))
            #expect(peer.endsWithin(seconds: 5), "\(name): no answer")
            let answer = String(decoding: peer.received, as: UTF8.self)
            #expect(answer.contains("Status: 200"), "\(name): \(answer.prefix(80))")
            return answer.contains("X-Request-Id: raw-id-0123\r\n")
        }
        #expect(try echoedId(under: "HTTP_X_REQUEST_ID"))
        for near in ["HTTP_X_REQUEST_IE", "HTTP_X_REQUEST_I", "HTTP_X_REQUEST_IDS", "http_x_request_id", "XTTP_X_REQUEST_ID"] {
            #expect(try !echoedId(under: near), "\(near) was taken for HTTP_X_REQUEST_ID")
        }
    }

    /// Requests libfcgi would read otherwise than the screen walks them (found by a review of the
    /// screen): padding on the begin record or on the params' empty record, which libfcgi reads
    /// as the next record's header, hiding a management record there; and a name-value pair
    /// whose lengths add up past `Int32.max` in libfcgi (a negative malloc size, an assertion
    /// that ended the worker).
    @Test func recordsLibfcgiWouldMisreadAreDroppedUnread() throws {
        let h = try GatewayHarness(workers: 1)
        let getValues = Self.getValues
        func padded(_ type: UInt8, _ content: [UInt8], padding: [UInt8]) -> [UInt8] {
            [1, type, 0, 1, UInt8(content.count >> 8), UInt8(content.count & 0xFF), UInt8(padding.count), 0] + content + padding
        }
        let body = Array("{\"platform\":\"ios\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let creation = FastCGIExchange.params([
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "\(body.count)",
        ])
        let health = FastCGIExchange.params(["REQUEST_METHOD": "GET", "REQUEST_URI": "/v1/health"])
        let cases: [(String, [UInt8])] = [
            (
                "padding on the begin record",
                padded(1, [0, 1, 0, 0, 0, 0, 0, 0], padding: getValues) + FastCGIExchange.record(4, health)
                    + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, [])
            ),
            (
                "padding on the params' end",
                FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + FastCGIExchange.record(4, creation)
                    + padded(4, [], padding: getValues) + FastCGIExchange.record(5, body) + FastCGIExchange.record(5, [])
            ),
            (
                "a value length of 2^31 - 2 after a name length of 1",
                FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + FastCGIExchange.record(4, [0x80, 0, 0, 1, 0xFF, 0xFF, 0xFF, 0xFE] + Array("X".utf8))
                    + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, [])
            ),
        ]
        for (what, bytes) in cases { try Self.expectDroppedUnread(bytes, by: h, what) }
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 5).status == 200)
    }

    /// Over TCP an urgent byte (`MSG_OOB`) that a later one supersedes was skipped by the screen's
    /// peeks and read in line by libfcgi, so the two saw different bytes: here a params record of
    /// 8 bytes for libfcgi that the screen took for the params' end, with a management record
    /// behind it. Urgent data is now in line for both.
    @Test func urgentDataOverTCPIsSeenAlikeByTheScreenAndLibfcgi() throws {
        let worker = try TCPWorker([:])
        defer { worker.stop() }
        #expect(FastCGIExchange.firstCreation(port: worker.port).hasPrefix("Status: 201"))
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = FastCGIExchange.loopback(worker.port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0)
        var on: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        func urgent(_ byte: UInt8) {
            var b = byte
            #expect(Glibc.send(fd, &b, 1, Int32(MSG_OOB) | Int32(MSG_NOSIGNAL)) == 1, "the urgent byte was not sent")
        }
        let getValues = Self.getValues
        try FastCGIExchange.send(fd, FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + [1, 4, 0, 1, 0])
        usleep(50_000)
        urgent(8)
        usleep(50_000)
        try FastCGIExchange.send(fd, [0])
        usleep(300_000)
        urgent(UInt8(ascii: "V"))
        usleep(50_000)
        try FastCGIExchange.send(fd, [0] + FastCGIExchange.record(5, []) + getValues + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, []))
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, 3000)
        #expect(worker.app.isRunning, "the worker died")
        #expect(try FastCGIExchange.creation(port: worker.port, pauseBeforeBody: 0).hasPrefix("Status: 201"))
    }

    /// On a Unix socket (Linux 5.15 on) an urgent byte was returned by the screen's peek from its
    /// peek offset and skipped by libfcgi's `read`: the screen took a params record of 77 bytes
    /// whose name held a management record, libfcgi one of 2 bytes followed by that record (a
    /// second review). Urgent data is in line on every connection now.
    @Test func urgentDataOnAUnixSocketIsSeenAlikeByTheScreenAndLibfcgi() throws {
        let h = try GatewayHarness(workers: 1)
        let getValues = Self.getValues
        let peer = try RawPeer(h.socketPath)
        try peer.send(FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + [1, 4, 0, 1, 0])
        var urgent: UInt8 = 77
        #expect(Glibc.send(peer.fd, &urgent, 1, Int32(MSG_OOB) | Int32(MSG_NOSIGNAL)) == 1, "no MSG_OOB on Unix sockets here")
        try peer.send([2, 0, 75, 0, 0] + getValues + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, []))
        _ = peer.endsWithin(seconds: 3)
        #expect(!peer.received.starts(with: [1, 10]), "libfcgi answered the management record")
        #expect(h.app?.isRunning == true, "the worker died")
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 5).status == 200)
    }

    /// Where a socket keeps no peek offset (TCP before Linux 6.10; here a debug build told to act
    /// so), a peek cannot wait for bytes past those it has seen: a request not whole at its first
    /// look went to libfcgi unscreened, management record and all (the third review). The screen
    /// now looks again from the start until the request is whole or its time is up.
    @Test func withoutAPeekOffsetTheScreenLooksAgainFromTheStart() throws {
        let h = try GatewayHarness(workers: 1, env: ["CW_TEST_NO_PEEK_OFFSET": "1", "WEATHER_BODY_TIMEOUT": "1"])
        let getValues = Self.getValues
        let begin = FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0])
        // A management record after a pause.
        let peer = try RawPeer(h.socketPath)
        try peer.send(begin)
        usleep(100_000)
        try peer.send(getValues + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, []))
        #expect(peer.endsWithin(seconds: 3), "the connection was kept")
        #expect(peer.received.isEmpty, "answered \(peer.received.prefix(16))")
        #expect(h.app?.isRunning == true, "the worker died")
        // A creation whose body comes 0.2 s after its head is served.
        let body = Array("{\"platform\":\"ios\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let params = FastCGIExchange.params([
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "\(body.count)",
        ])
        let creation = try RawPeer(h.socketPath)
        try creation.send(begin + FastCGIExchange.record(4, params) + FastCGIExchange.record(4, []))
        usleep(200_000)
        try creation.send(FastCGIExchange.record(5, body) + FastCGIExchange.record(5, []))
        _ = creation.endsWithin(seconds: 3)
        #expect(String(decoding: creation.received, as: UTF8.self).contains("Status: 201"), "\(String(decoding: creation.received.prefix(200), as: UTF8.self))")
        // A trickled head is still dropped when its time is up.
        let trickle = try RawPeer(h.socketPath)
        let started = Date()
        var sent = 0
        while sent < begin.count, (try? trickle.send([begin[sent]])) != nil, !trickle.endsWithin(seconds: 0.3) { sent += 1 }
        #expect(Date().timeIntervalSince(started) < 2.5, "held \(Date().timeIntervalSince(started)) s")
    }

    /// libfcgi keeps every parameter of a head without end (300 MB grew a worker to 319 MB): the
    /// connection is dropped once a head's records pass 128 KiB, long before the wait runs out.
    @Test func aHeadWithoutEndIsDroppedAtTheLimit() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_BODY_TIMEOUT": "20"])
        let peer = try RawPeer(h.socketPath)
        let started = Date()
        try peer.send(FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]))
        let value = [UInt8](repeating: UInt8(ascii: "a"), count: 8_000)
        var sent = 0
        while sent < 4_000_000, (try? peer.send(FastCGIExchange.record(4, [3] + FastCGIExchange.length(value.count) + Array("X_N".utf8) + value))) != nil {
            sent += value.count
        }
        #expect(sent < 4_000_000, "4 MB of parameters were taken")
        #expect(peer.endsWithin(seconds: 3))
        #expect(Date().timeIntervalSince(started) < 5, "dropped after \(Date().timeIntervalSince(started)) s")
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 5).status == 200)
    }

    /// A body that goes on past the screen's 128 KiB is answered by the handler from its
    /// `Content-Length` (413), not dropped: mod_fcgid passes chunked bodies of up to 128 KiB on,
    /// and took a dropped connection for a broken worker (500, the worker killed; a review). A
    /// head of mod_fcgid's largest (about 64 KiB of parameters) with a body is served.
    @Test func aBodyPastTheLimitIsAnsweredAndALargeHeadServed() throws {
        let h = try GatewayHarness(workers: 1)
        /// `length` nil: no CONTENT_LENGTH but a Transfer-Encoding, as a front end that streams a
        /// chunked body on (nginx with `fastcgi_request_buffering off`) passes it.
        func request(_ extra: [String: String], body: [UInt8], length: Int?) -> [UInt8] {
            var params = [
                "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
                "CONTENT_TYPE": "application/json",
            ]
            if let length { params["CONTENT_LENGTH"] = "\(length)" } else { params["HTTP_TRANSFER_ENCODING"] = "chunked" }
            params.merge(extra) { $1 }
            var bytes = FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0])
            // In records of at most 8 KiB, as web servers write them.
            for records in [FastCGIExchange.params(params), body] {
                for start in stride(from: 0, to: records.count, by: 8_192) {
                    bytes += FastCGIExchange.record(body == records ? 5 : 4, Array(records[start..<min(start + 8_192, records.count)]))
                }
                bytes += FastCGIExchange.record(body == records ? 5 : 4, [])
            }
            return bytes
        }
        let big = [UInt8](repeating: 32, count: 150_000)
        let peer = try RawPeer(h.socketPath)
        try peer.send(request([:], body: big, length: big.count))
        #expect(peer.endsWithin(seconds: 3))
        let answer = String(decoding: peer.received, as: UTF8.self)
        #expect(answer.contains("Status: 413") && answer.contains("payload_too_large"), "\(answer.prefix(300))")

        let headers = Dictionary(uniqueKeysWithValues: (0..<8).map { ("HTTP_X_PAD_\($0)", String(repeating: "p", count: 8_190)) })
        let body = Array("{\"platform\":\"ios\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let large = request(headers, body: body, length: body.count)
        #expect(large.count > 65_536)
        let served = try RawPeer(h.socketPath)
        try served.send(large)
        #expect(served.endsWithin(seconds: 3))
        let created = String(decoding: served.received, as: UTF8.self)
        #expect(created.contains("Status: 201"), "\(created.prefix(300))")

        // A body without a length is read to the end of its stream (session 27; it was left
        // unread and the creation answered 400), and one past the limit is 413.
        for (body, status) in [(body, "201"), ([UInt8](repeating: 32, count: 5_000), "413"), (big, "413")] {
            let peer = try RawPeer(h.socketPath)
            try peer.send(request([:], body: body, length: nil))
            #expect(peer.endsWithin(seconds: 3))
            let answer = String(decoding: peer.received, as: UTF8.self)
            #expect(answer.contains("Status: \(status)"), "\(body.count) bytes without a length: \(answer.prefix(300))")
        }
        #expect(h.app?.isRunning == true)
    }

    /// A head that comes a byte at a time, each byte within the wait, held the worker for as long
    /// as it trickled: the whole head must now come within `WEATHER_BODY_TIMEOUT` of the first look
    /// that found it incomplete.
    @Test func aTrickledHeadIsDroppedAfterTheWait() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_BODY_TIMEOUT": "1"])
        let head =
            FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0])
            + FastCGIExchange.record(4, [14, 3] + Array("REQUEST_METHODGET".utf8) + [11, 10] + Array("REQUEST_URI/v1/health".utf8))
            + FastCGIExchange.record(4, []) + FastCGIExchange.record(5, [])
        let peer = try RawPeer(h.socketPath)
        let started = Date()
        var sent = 0
        while sent < head.count - 1, (try? peer.send([head[sent]])) != nil, !peer.endsWithin(seconds: 0.2) {
            sent += 1
        }
        let held = Date().timeIntervalSince(started)
        #expect(sent < head.count - 1, "the whole head but its last byte was taken over \(held) s")
        #expect(held < 2.5, "dropped after \(held) s")
        #expect(peer.received.isEmpty)
        #expect(try HTTPClient.send(port: h.port, "GET", "/v1/health", timeout: 5).status == 200)
    }

    /// A body that comes a byte at a time, each within the wait, is answered 400 once the wait
    /// has run out for the whole request (it took as long as the peer trickled).
    @Test func aTrickledBodyIsAnsweredWhenTheWaitRunsOut() throws {
        let h = try GatewayHarness(workers: 1, env: ["WEATHER_BODY_TIMEOUT": "1"])
        let body = Array("{\"platform\":\"ios\",\"installationId\":\"\(UUID().uuidString)\"}".utf8)
        let pairs = FastCGIExchange.params([
            "REQUEST_METHOD": "POST", "REQUEST_URI": "/v1/weather/session", "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "\(body.count)",
        ])
        let peer = try RawPeer(h.socketPath)
        let started = Date()
        try peer.send(FastCGIExchange.record(1, [0, 1, 0, 0, 0, 0, 0, 0]) + FastCGIExchange.record(4, pairs) + FastCGIExchange.record(4, []))
        var sent = 0
        while sent < body.count - 1, (try? peer.send(FastCGIExchange.record(5, [body[sent]]))) != nil, !peer.endsWithin(seconds: 0.2) {
            sent += 1
        }
        let held = Date().timeIntervalSince(started)
        let answer = String(decoding: peer.received, as: UTF8.self)
        #expect(answer.contains("Status: 400"), "\(answer.prefix(300))")
        #expect(held < 2.5, "answered after \(held) s, \(sent) bytes")
    }
}

/// A client connection to a Unix socket that writes raw bytes and watches for the worker's end.
final class RawPeer {
    let fd: Int32
    private(set) var received: [UInt8] = []

    init(_ path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ClientError("socket failed") }
        var address = FastCGIExchange.unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw ClientError("connect failed")
        }
        // A send the worker does not take fails after a second instead of blocking the test.
        var timeout = timeval(tv_sec: 1, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) throws { try FastCGIExchange.send(fd, bytes) }

    /// True when the worker closes (or resets) the connection within `seconds`; what it sent
    /// before is kept in `received`.
    func endsWithin(seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let left = deadline.timeIntervalSinceNow
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(max(0, left * 1000))) > 0 else { return false }
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if n > 0 {
                received += buffer[0..<n]
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EINTR) { continue }
            return true
        }
    }
}
