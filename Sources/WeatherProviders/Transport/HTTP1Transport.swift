import WeatherCore
import CHTTPClient
#if canImport(Glibc)
import Glibc
#endif

/// `HTTPTransport` as a small HTTP/1.1 client: GET only, over plain TCP or TLS (libssl), with one
/// deadline for the whole call, kept-alive connections per origin, gzip, and a body cap.
///
/// It replaced libcurl, whose dependency tree (GnuTLS, Kerberos, LDAP, SSH, RTMP, ...) cost every
/// worker about 4 MB of memory for a job this narrow (docs/decisions.md, "Provider HTTP client").
/// Calls are serialised by a mutex, and a FastCGI worker serves one request at a time anyway.
/// Errors never carry the URL, because provider URLs contain keys. Redirects are not followed,
/// and no proxy is used.
public final class HTTP1Transport: HTTPTransport, @unchecked Sendable {
    /// Bodies larger than this (before or after decompression) are refused as `.unparseable`:
    /// a real forecast is ~30 KiB, so anything near the cap is not a forecast and must not grow
    /// the worker's memory.
    public static let defaultMaxBodyBytes = 2 * 1024 * 1024
    /// A response head (status line and headers) longer than this is not a provider's answer.
    static let maxHeadBytes = 64 * 1024
    /// Origins whose connection is kept between calls; a gateway talks to two providers.
    static let maxIdleConnections = 4
    /// Interim (1xx) responses skipped before the real one; more is not an HTTP server's answer.
    static let maxInterimResponses = 8

    private let maxBodyBytes: Int
    private let userAgent: String
    private let caFile: String?
    private let mutex = PthreadMutex()
    private var idle: [String: HTTPConnection] = [:]
    private var tls: TLSClientContext?
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16 * 1024, alignment: 1)

    /// Creates the transport. Nothing is connected or loaded until the first call; `caFile`
    /// replaces the system's certificate authorities for `https`.
    ///
    /// A write to a connection the provider has closed raises SIGPIPE, which by default ends the
    /// process; creating a transport therefore ignores SIGPIPE process-wide (the FastCGI server
    /// does the same).
    public init(maxBodyBytes: Int = HTTP1Transport.defaultMaxBodyBytes, userAgent: String = "closet-weather-gateway/1", caFile: String? = nil) {
        precondition(maxBodyBytes > 0, "body cap must be positive")
        self.maxBodyBytes = maxBodyBytes
        self.userAgent = userAgent
        self.caFile = caFile
        signal(SIGPIPE, SIG_IGN)
    }

    deinit {
        buffer.deallocate()
    }

    /// Performs one GET with `timeoutSeconds` as the deadline for resolving, connecting, the TLS
    /// handshake and the whole answer together.
    public func get(_ url: String, timeoutSeconds: Double) throws(ProviderFailure) -> HTTPResult {
        precondition(timeoutSeconds > 0 && timeoutSeconds.isFinite, "timeout must be positive")
        guard let target = HTTPTarget(url) else { throw .transport }
        mutex.lock()
        defer { mutex.unlock() }

        let deadline = MonotonicTime.milliseconds() + max(1, Int64((timeoutSeconds * 1000).rounded(.up)))
        let request = requestBytes(for: target)
        if let kept = idle.removeValue(forKey: target.origin), kept.isReusable {
            switch exchange(request, on: kept, origin: target.origin, until: deadline) {
            case .success(let result): return result
            case .failure(.closedBeforeAnswer): break  // dropped while idle: a fresh connection follows
            case .failure(.failed(let failure)): throw failure
            }
        }
        if target.tls && tls == nil { tls = try TLSClientContext(caFile: caFile) }
        let connection = try HTTPConnection(to: target, tls: target.tls ? tls : nil, deadline: deadline)
        switch exchange(request, on: connection, origin: target.origin, until: deadline) {
        case .success(let result): return result
        case .failure(.closedBeforeAnswer): throw .transport
        case .failure(.failed(let failure)): throw failure
        }
    }

    private enum ExchangeFailure: Error {
        /// Nothing came back before the connection ended: on a reused connection, the server had
        /// closed it while idle, and the request is safe to send again.
        case closedBeforeAnswer
        case failed(ProviderFailure)
    }

    private func requestBytes(for target: HTTPTarget) -> [UInt8] {
        Array(
            """
            GET \(target.requestTarget) HTTP/1.1\r
            Host: \(target.hostHeader)\r
            User-Agent: \(userAgent)\r
            Accept: application/json\r
            Accept-Encoding: gzip\r
            \r

            """.utf8)
    }

    /// Sends the request and reads one whole response; keeps the connection when the response
    /// allows it and left nothing unread.
    private func exchange(_ request: [UInt8], on connection: HTTPConnection, origin: String, until deadline: Int64) -> Result<HTTPResult, ExchangeFailure> {
        var received: [UInt8] = []
        do {
            try connection.send(request, until: deadline)
        } catch .timeout {
            return .failure(.failed(.timeout))
        } catch {
            return .failure(.closedBeforeAnswer)
        }

        // The head; interim 1xx responses are skipped, a few.
        var head: HTTPResponseHead
        var bodyStart: Int
        var interim = 0
        while true {
            if let end = HTTPResponseHead.end(in: received[...]) {
                guard let parsed = HTTPResponseHead(received[..<end]) else { return .failure(.failed(.transport)) }
                if parsed.status < 200 {
                    interim += 1
                    guard interim <= Self.maxInterimResponses else { return .failure(.failed(.transport)) }
                    received.removeSubrange(..<end)
                    continue
                }
                head = parsed
                bodyStart = end
                break
            }
            guard received.count <= Self.maxHeadBytes else { return .failure(.failed(.transport)) }
            switch receive(on: connection, until: deadline) {
            case .success(0): return .failure(received.isEmpty ? .closedBeforeAnswer : .failed(.transport))
            case .success(let n): received.append(contentsOf: buffer[..<n])
            case .failure(.transport) where received.isEmpty: return .failure(.closedBeforeAnswer)
            case .failure(let failure): return .failure(.failed(failure))
            }
        }

        let leftover = received[bodyStart...]
        var body: [UInt8]
        var reusable = head.keepAlive
        switch readBody(head.framing, leftover: leftover, on: connection, until: deadline) {
        case .success(let read):
            body = read.body
            reusable = reusable && read.exact
        case .failure(let failure):
            return .failure(.failed(failure))
        }
        if head.gzip && !body.isEmpty {
            if let inflated = Self.gunzip(body, limit: maxBodyBytes) {
                body = inflated
            } else if (200..<300).contains(head.status) {
                // Corrupt, or larger than the limit once inflated: not something to read.
                return .failure(.failed(.unparseable))
            } else {
                // An error answer's body is never read: its status says what happened (a 5xx
                // with a broken body was `unparseable`, which pauses nothing).
                body = []
            }
        }
        if reusable {
            if idle.count >= Self.maxIdleConnections { idle.removeAll() }
            idle[origin] = connection
        }
        return .success(HTTPResult(status: head.status, retryAfterSeconds: head.retryAfterSeconds, body: body))
    }

    private func receive(on connection: HTTPConnection, until deadline: Int64) -> Result<Int, ProviderFailure> {
        do {
            return .success(try connection.receive(into: buffer, until: deadline))
        } catch {
            return .failure(error)
        }
    }

    /// Reads the body as the head frames it. `exact` is false when bytes followed the body,
    /// which leaves the connection unusable for the next response.
    private func readBody(_ framing: HTTPResponseHead.Framing, leftover: ArraySlice<UInt8>, on connection: HTTPConnection, until deadline: Int64) -> Result<
        (body: [UInt8], exact: Bool), ProviderFailure
    > {
        switch framing {
        case .none:
            return .success(([], leftover.isEmpty))
        case .length(let length):
            guard length <= maxBodyBytes else { return .failure(.unparseable) }
            var body = Array(leftover.prefix(length))
            let exact = leftover.count <= length
            body.reserveCapacity(length)
            while body.count < length {
                switch receive(on: connection, until: deadline) {
                case .success(0): return .failure(.transport)  // cut short
                case .success(let n):
                    let take = min(n, length - body.count)
                    body.append(contentsOf: buffer[..<take])
                    if take < n { return .success((body, false)) }
                case .failure(let failure): return .failure(failure)
                }
            }
            return .success((body, exact))
        case .chunked:
            var decoder = ChunkedDecoder(limit: maxBodyBytes)
            do {
                var consumed = try leftover.withUnsafeBytes { try decoder.feed($0) }
                var exact = consumed == leftover.count
                while !decoder.isComplete {
                    switch receive(on: connection, until: deadline) {
                    case .success(0): return .failure(.transport)
                    case .success(let n):
                        consumed = try decoder.feed(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
                        exact = consumed == n
                    case .failure(let failure): return .failure(failure)
                    }
                }
                return .success((decoder.body, exact))
            } catch let failure as ChunkedDecoder.Failure where failure == .tooLarge {
                return .failure(.unparseable)
            } catch {
                return .failure(.transport)
            }
        case .untilClose:
            var body = Array(leftover)
            while true {
                guard body.count <= maxBodyBytes else { return .failure(.unparseable) }
                switch receive(on: connection, until: deadline) {
                case .success(0): return .success((body, false))
                case .success(let n): body.append(contentsOf: buffer[..<n])
                case .failure(let failure): return .failure(failure)
                }
            }
        }
    }

    /// Decompresses a gzip (or zlib) body; nil when it is broken, truncated or inflates past `limit`.
    static func gunzip(_ data: [UInt8], limit: Int) -> [UInt8]? {
        var stream = z_stream()
        guard chttp_inflate_init(&stream) == Z_OK else { return nil }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 32 * 1024)
        return data.withUnsafeBufferPointer { input -> [UInt8]? in
            stream.next_in = UnsafeMutablePointer(mutating: input.baseAddress)
            stream.avail_in = UInt32(input.count)
            while true {
                let status = chunk.withUnsafeMutableBufferPointer { out -> Int32 in
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(out.count)
                    return inflate(&stream, Z_NO_FLUSH)
                }
                let produced = chunk.count - Int(stream.avail_out)
                guard output.count + produced <= limit else { return nil }
                output.append(contentsOf: chunk[..<produced])
                if status == Z_STREAM_END { return output }
                // Z_BUF_ERROR with no input left: the stream ended before its trailer.
                guard status == Z_OK, produced > 0 || stream.avail_in > 0 else { return nil }
            }
        }
    }
}
