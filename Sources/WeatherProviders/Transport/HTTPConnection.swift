import WeatherCore
import CHTTPClient
#if canImport(Glibc)
import Glibc
#endif

/// One TCP connection to a provider, with TLS when the URL is `https`, and every wait on it
/// bounded by the caller's deadline.
///
/// The socket is non-blocking; each operation polls for readiness until the deadline, so a
/// silent peer costs at most the timeout. Owns the descriptor and the `SSL` object.
final class HTTPConnection {
    private let fd: Int32
    private var ssl: OpaquePointer?

    /// Resolves, connects (trying each address in turn) and, for `https`, completes the
    /// handshake with certificate and host-name verification, all before `deadline`.
    init(to target: HTTPTarget, tls: TLSClientContext?, deadline: Int64) throws(ProviderFailure) {
        let left = deadline - MonotonicTime.milliseconds()
        guard left > 0 else { throw .timeout }
        var addresses: UnsafeMutablePointer<addrinfo>?
        guard let resolver = Self.resolver else { throw .transport }
        switch chttp_resolve(resolver, target.host, String(target.port), Int32(clamping: left), &addresses) {
        case Int32(CHTTP_RESOLVED): break
        // Busy: every lookup slot holds a lookup that outlived its caller, so the resolver
        // is not answering in time.
        case Int32(CHTTP_RESOLVE_TIMEOUT), Int32(CHTTP_RESOLVE_BUSY): throw .timeout
        default: throw .transport
        }
        defer { freeaddrinfo(addresses) }

        var candidates: [Address] = []
        var next = addresses
        while let address = next?.pointee {
            next = address.ai_next
            candidates.append(
                Address(
                    family: address.ai_family, type: address.ai_socktype, proto: address.ai_protocol,
                    address: address.ai_addr, length: address.ai_addrlen))
        }
        fd = try Self.connectFirst(of: candidates, deadline: deadline)

        if let tls {
            // self is whole from here on: a throw runs deinit, which closes fd and frees ssl.
            guard let ssl = SSL_new(tls.context) else { throw .transport }
            self.ssl = ssl
            try handshake(ssl, host: target.host, deadline: deadline)
        }
    }

    /// The process's name lookups (`chttp_resolve`): a name whose lookup outlived its caller is
    /// waited for again rather than looked up on another thread. Lives as long as the process.
    nonisolated(unsafe) static let resolver = chttp_resolver_new(nil)

    /// One address to try, as the resolver gave it (`address` points into its list).
    struct Address {
        var family: Int32
        var type: Int32
        var proto: Int32
        var address: UnsafePointer<sockaddr>?
        var length: socklen_t
    }

    /// Connects to the first of `addresses` that answers, trying them in turn, and returns the
    /// socket (non-blocking). While more than one address is left, one gets an equal share of the
    /// time left, at least a second: a first address whose packets vanish (an IPv6 route that
    /// exists but goes nowhere) used to take the whole deadline, and the next one was never
    /// tried. `.timeout` when time ran out on an address, `.transport` when each one refused.
    static func connectFirst(of addresses: [Address], deadline: Int64) throws(ProviderFailure) -> Int32 {
        var timedOut = false
        for (i, address) in addresses.enumerated() {
            let now = MonotonicTime.milliseconds()
            guard now < deadline else { throw .timeout }
            let left = addresses.count - i
            let until = left == 1 ? deadline : min(deadline, now + max((deadline - now) / Int64(left), 1_000))
            let fd = socket(address.family, address.type | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), address.proto)
            guard fd >= 0 else { continue }
            if connect(fd, address.address, address.length) == 0 { return fd }
            guard errno == EINPROGRESS else {
                close(fd)
                continue
            }
            do {
                try wait(fd, for: Int16(POLLOUT), until: until)
            } catch {
                close(fd)
                if error == .timeout {
                    timedOut = true
                    continue
                }
                throw error
            }
            var status: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            if getsockopt(fd, SOL_SOCKET, SO_ERROR, &status, &length) == 0 && status == 0 { return fd }
            close(fd)
        }
        throw timedOut ? .timeout : .transport
    }

    deinit {
        if let ssl { SSL_free(ssl) }
        close(fd)
    }

    /// Sends all of `bytes` before the deadline.
    func send(_ bytes: [UInt8], until deadline: Int64) throws(ProviderFailure) {
        var sent = 0
        while sent < bytes.count {
            guard MonotonicTime.milliseconds() < deadline else { throw .timeout }
            let n = bytes.withUnsafeBytes { raw in
                let rest = UnsafeRawBufferPointer(rebasing: raw[sent...])
                if let ssl { return Int(SSL_write(ssl, rest.baseAddress, Int32(clamping: rest.count))) }
                return Glibc.send(fd, rest.baseAddress, rest.count, Int32(MSG_NOSIGNAL))
            }
            if n > 0 {
                sent += n
            } else {
                try waitAfterFailure(result: n, writing: true, until: deadline)
            }
        }
    }

    /// Reads what has arrived into `buffer`, waiting for it until the deadline; 0 means the peer
    /// closed the connection. The deadline is checked before every read, not only when one would
    /// wait: a peer that keeps the socket readable (an endless stream of interim responses,
    /// trailers or chunk extensions) is cut off on time too.
    func receive(into buffer: UnsafeMutableRawBufferPointer, until deadline: Int64) throws(ProviderFailure) -> Int {
        while true {
            guard MonotonicTime.milliseconds() < deadline else { throw .timeout }
            let n: Int
            if let ssl {
                n = Int(SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count)))
                if n <= 0 && SSL_get_error(ssl, Int32(n)) == SSL_ERROR_ZERO_RETURN { return 0 }
            } else {
                n = recv(fd, buffer.baseAddress, buffer.count, 0)
                if n == 0 { return 0 }
            }
            if n > 0 { return n }
            try waitAfterFailure(result: n, writing: false, until: deadline)
        }
    }

    /// Whether a kept-alive connection can carry another request: an idle connection that is
    /// readable has been closed by the server (or sent something unasked), so it cannot.
    var isReusable: Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) == 0
    }

    /// After a read or write that did not move bytes: waits when the socket (or TLS) asks for it,
    /// throws otherwise. A plain socket waits for the direction it failed in: polling a socket
    /// that is waiting for data for "writable" too would return at once, again and again.
    private func waitAfterFailure(result: Int, writing: Bool, until deadline: Int64) throws(ProviderFailure) {
        if let ssl {
            let code = SSL_get_error(ssl, Int32(result))
            ERR_clear_error()
            switch code {
            case SSL_ERROR_WANT_READ: try Self.wait(fd, for: Int16(POLLIN), until: deadline)
            case SSL_ERROR_WANT_WRITE: try Self.wait(fd, for: Int16(POLLOUT), until: deadline)
            default: throw .transport
            }
            return
        }
        switch errno {
        case EINTR: return
        case EAGAIN, EWOULDBLOCK: try Self.wait(fd, for: Int16(writing ? POLLOUT : POLLIN), until: deadline)
        default: throw .transport
        }
    }

    private func handshake(_ ssl: OpaquePointer, host: String, deadline: Int64) throws(ProviderFailure) {
        guard SSL_set_fd(ssl, fd) == 1 else { throw .transport }
        // A certificate must name what the URL names: an IP address for a literal, else the host
        // name, which also goes out as SNI.
        if Self.isAddressLiteral(host) {
            guard X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) == 1 else { throw .transport }
        } else {
            guard chttp_ssl_set_sni(ssl, host) == 1, SSL_set1_host(ssl, host) == 1 else { throw .transport }
        }
        while true {
            guard MonotonicTime.milliseconds() < deadline else { throw .timeout }
            let result = SSL_connect(ssl)
            if result == 1 { return }
            // Anything but "wait for the socket" fails the call: a certificate the verification
            // refused (untrusted, expired, another name) as `.tls`, anything else (a protocol
            // error, a reset) as `.transport`.
            do {
                try waitAfterFailure(result: Int(result), writing: false, until: deadline)
            } catch {
                if error == .transport && SSL_get_verify_result(ssl) != 0 { throw .tls }  // 0: X509_V_OK
                throw error
            }
        }
    }

    private static func isAddressLiteral(_ host: String) -> Bool {
        var scratch = in6_addr()
        return inet_pton(AF_INET, host, &scratch) == 1 || inet_pton(AF_INET6, host, &scratch) == 1
    }

    /// Polls `fd` for `events` until the deadline; `.timeout` when it passes.
    private static func wait(_ fd: Int32, for events: Int16, until deadline: Int64) throws(ProviderFailure) {
        while true {
            let left = deadline - MonotonicTime.milliseconds()
            guard left > 0 else { throw .timeout }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready > 0 { return }  // readable, writable, or an error the next call will report
            if ready == 0 { throw .timeout }
            guard errno == EINTR else { throw .transport }
        }
    }
}
