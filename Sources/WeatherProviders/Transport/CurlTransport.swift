import CCurl
#if canImport(Glibc)
import Glibc
#endif

/// `HTTPTransport` over libcurl, owning one easy handle so consecutive calls to the same provider
/// reuse the TLS connection (keep-alive) instead of paying a handshake per request.
///
/// Calls are serialised by a mutex: one easy handle must not be used by two threads at once, and
/// a FastCGI worker serves one request at a time anyway. Errors never carry the URL, because
/// provider URLs contain keys.
public final class CurlTransport: HTTPTransport, @unchecked Sendable {
    /// Bodies larger than this are refused as `.unparseable`: a real forecast is ~30 KiB, so
    /// anything near the cap is not a forecast and must not grow the worker's memory.
    public static let defaultMaxBodyBytes = 2 * 1024 * 1024

    /// `curl_global_init` is not thread-safe and must run once per process; a static `let` is
    /// initialised exactly once, on first use, under the runtime's own lock.
    private static let globalInitCode: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    private let handle: UnsafeMutableRawPointer
    private let maxBodyBytes: Int
    private let mutex = PthreadMutex()

    /// The first CA bundle that exists among the usual distribution paths (nil: libcurl's default).
    static let caBundle: String? = [
        "/etc/ssl/certs/ca-certificates.crt",      // Debian, Ubuntu, Alpine
        "/etc/pki/tls/certs/ca-bundle.crt",        // Fedora, RHEL, CentOS, CloudLinux
        "/etc/ssl/ca-bundle.pem",                  // openSUSE
        "/etc/pki/tls/cacert.pem",                 // OpenELEC
        "/etc/ssl/cert.pem",                       // Alpine, macOS-style
    ].first { access($0, R_OK) == 0 }

    /// Creates the transport and its easy handle; throws `.transport` if libcurl cannot start.
    public init(maxBodyBytes: Int = CurlTransport.defaultMaxBodyBytes, userAgent: String = "closet-weather-gateway/1") throws(ProviderFailure) {
        precondition(maxBodyBytes > 0, "body cap must be positive")
        guard Self.globalInitCode == CURLE_OK, let h = curl_easy_init() else { throw .transport }
        handle = h
        self.maxBodyBytes = maxBodyBytes
        // Without NOSIGNAL libcurl uses SIGALRM for DNS timeouts, which is unsafe in a process
        // that also handles signals for graceful shutdown.
        _ = ccurl_setopt_long(h, CURLOPT_NOSIGNAL, 1)
        // Providers are reached over https (http only for loopback fakes); never let a redirect
        // or a crafted base URL turn this into file:// or another protocol.
        _ = ccurl_setopt_string(h, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = ccurl_setopt_long(h, CURLOPT_FOLLOWLOCATION, 0)
        // Empty string: accept every encoding libcurl can decode; forecasts compress ~10x.
        _ = ccurl_setopt_string(h, CURLOPT_ACCEPT_ENCODING, "")
        _ = ccurl_setopt_string(h, CURLOPT_USERAGENT, userAgent)
        // The release bundle ships Debian's libcurl, which looks for CA certificates only at
        // Debian's path; on other distributions point it at theirs.
        if let bundle = Self.caBundle { _ = ccurl_setopt_string(h, CURLOPT_CAINFO, bundle) }
        _ = ccurl_setopt_write_function(h) { data, size, count, context in
            guard let context else { return 0 }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            let n = size * count
            guard n > 0, let data else { return n }
            // Returning a short count makes libcurl abort with CURLE_WRITE_ERROR.
            guard sink.body.count + n <= sink.limit else {
                sink.overflowed = true
                return 0
            }
            sink.body.append(contentsOf: UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
        _ = ccurl_setopt_header_function(h) { data, size, count, context in
            let n = size * count
            guard let context, let data, n > 0 else { return n }
            let sink = Unmanaged<ResponseSink>.fromOpaque(context).takeUnretainedValue()
            sink.header(UnsafeRawBufferPointer(start: data, count: n))
            return n
        }
    }

    deinit {
        curl_easy_cleanup(handle)
    }

    /// Performs one GET with `timeoutSeconds` as the deadline for connect and for the whole call.
    public func get(_ url: String, timeoutSeconds: Double) throws(ProviderFailure) -> HTTPResult {
        precondition(timeoutSeconds > 0 && timeoutSeconds.isFinite, "timeout must be positive")
        mutex.lock()
        defer { mutex.unlock() }

        let sink = ResponseSink(limit: maxBodyBytes)
        let timeoutMs = max(1, Int((timeoutSeconds * 1000).rounded(.up)))
        let code: CURLcode = withExtendedLifetime(sink) {
            let context = Unmanaged.passUnretained(sink).toOpaque()
            _ = ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, context)
            _ = ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, context)
            _ = ccurl_setopt_long(handle, CURLOPT_TIMEOUT_MS, timeoutMs)
            _ = ccurl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, timeoutMs)
            _ = ccurl_setopt_string(handle, CURLOPT_URL, url)  // libcurl copies the string
            let code = curl_easy_perform(handle)
            // The sink dies with this call; leave no dangling pointer in the handle.
            _ = ccurl_setopt_pointer(handle, CURLOPT_WRITEDATA, nil)
            _ = ccurl_setopt_pointer(handle, CURLOPT_HEADERDATA, nil)
            return code
        }

        switch code {
        case CURLE_OK:
            var status = 0
            _ = ccurl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
            // No status means no HTTP answer at all (e.g. an HTTP/0.9 reply to a stray port).
            guard status > 0 else { throw .transport }
            return HTTPResult(status: status, retryAfterSeconds: sink.retryAfterSeconds, body: sink.body)
        case CURLE_WRITE_ERROR where sink.overflowed:
            throw .unparseable
        case CURLE_OPERATION_TIMEDOUT:
            throw .timeout
        default:
            // Resolve, connect, TLS, reset, empty reply: all mean "no usable answer arrived".
            throw .transport
        }
    }
}

/// Where the libcurl callbacks of one call put what they receive.
private final class ResponseSink {
    let limit: Int
    var body: [UInt8] = []
    var overflowed = false
    var retryAfterSeconds: Int?

    init(limit: Int) { self.limit = limit }

    /// Picks `Retry-After` out of one header line. A status line resets it, because libcurl also
    /// reports the headers of interim responses (`100 Continue`) and only the last one counts.
    func header(_ line: UnsafeRawBufferPointer) {
        if line.starts(with: "HTTP/".utf8) {
            retryAfterSeconds = nil
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let name = line[..<colon].map { ($0 >= 65 && $0 <= 90) ? $0 + 32 : $0 }
        guard name.elementsEqual("retry-after".utf8) else { return }
        retryAfterSeconds = Self.deltaSeconds(line[(colon + 1)...])
    }

    /// The delta-seconds form only; an HTTP-date would need a clock and a date parser for a hint.
    static func deltaSeconds(_ value: Slice<UnsafeRawBufferPointer>) -> Int? {
        let isSpace: (UInt8) -> Bool = { $0 == 32 || $0 == 9 || $0 == 13 || $0 == 10 }
        let digits = value.drop(while: isSpace).reversed().drop(while: isSpace).reversed()
        guard !digits.isEmpty, digits.count <= 9, digits.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return digits.reduce(0) { $0 * 10 + Int($1 - 48) }
    }
}
