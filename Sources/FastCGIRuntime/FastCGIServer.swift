import CFastCGI
import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Set by SIGTERM/SIGINT/SIGUSR1; read between requests (and by the supervisor). A plain flag is
/// all a signal handler may touch.
nonisolated(unsafe) var shutdownRequested: sig_atomic_t = 0

/// The descriptor `serve` accepts on, and a socket that listens on nothing, for the stop handler
/// to put in its place (-1: not serving). A stop that lands after the loop's check of the flag and
/// before it enters `accept` would otherwise wait for the next connection or idle wake-up (with
/// `WEATHER_FLUSH_INTERVAL=0`, for ever); on the stand-in, `accept` fails at once.
nonisolated(unsafe) var listenFDForStop: Int32 = -1
nonisolated(unsafe) var stopStandIn: Int32 = -1

/// The FastCGI side of the worker, on libfcgi's reentrant `FCGX_*` API.
///
/// Serves the listening socket inherited on fd 0 (spawn-fcgi, mod_fcgid, systemd socket
/// activation) or one bound with `--listen`; answers a single request when started as plain CGI.
/// On SIGTERM it finishes the request in hand and returns.
public enum FastCGIServer {
    /// One request's parameters and body reader, and the place its response goes.
    public typealias Handler = (_ params: CGIParameters, _ readBody: (Int) -> [UInt8]) -> Response

    /// True when fd 0 is not a FastCGI listening socket (started by a web server as CGI, or by hand).
    public static var isCGI: Bool { FCGX_IsCGI() != 0 }

    /// Binds `address` and returns its descriptor: `/path/to.sock`, `host:port`, or `port` (or
    /// `:port`), which is 127.0.0.1 (libfcgi would take every interface: anyone who reaches the
    /// port could send any `REMOTE_ADDR`; say `0.0.0.0:port` for that).
    ///
    /// A path is taken over only from a socket nothing listens on any more (left by a process
    /// that died); a live socket (another instance) or any other file there is an error, and
    /// stays as it was.
    public static func listen(_ address: String, mode: mode_t = 0o660, backlog: Int32 = 128) throws -> Int32 {
        let spec = address.hasPrefix("/") ? address : address.contains(":") ? address : ":" + address
        let bound = spec.hasPrefix(":") ? "127.0.0.1" + spec : spec
        guard bound.hasPrefix("/") else { return try bindTCPSocket(bound, shown: address, backlog: backlog) }
        try removeStaleSocket(bound)
        let fd = try bindUnixSocket(bound, backlog: backlog)
        chmod(bound, mode)
        var info = stat()
        if lstat(bound, &info) == 0 { boundSocket = (info.st_dev, info.st_ino) }
        return fd
    }

    /// A listening Unix socket at `path`, which must not exist: bound here, not by libfcgi's
    /// `FCGX_OpenSocket`, which unlinks the path first (two starts overlapping would each remove
    /// the other's live socket). Created 0600 (the umask for the moment of `bind`), so it is
    /// never open to more than `mode` allows.
    static func bindUnixSocket(_ path: String, backlog: Int32) throws -> Int32 {
        guard var address = unixAddress(path) else { throw FastCGIError("cannot listen on \(path): the path is too long for a socket") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError("cannot listen on \(path): \(String(cString: strerror(errno)))") }
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = errno == EADDRINUSE ? "another process made that socket meanwhile" : String(cString: strerror(errno))
            close(fd)
            throw FastCGIError("cannot listen on \(path): \(reason)")
        }
        return fd
    }

    /// A listening TCP socket on `host:port` (IPv4; a host name is resolved, as libfcgi did),
    /// with SO_REUSEADDR. Bound here, not by libfcgi's `FCGX_OpenSocket`, which read the port with
    /// `atoi` (`99999` listened on 34463, `-5` on 65531, `0` made a Unix socket named
    /// `127.0.0.1:0` in the working folder) and on a failure exited the process with errno as its
    /// status and a line that named neither the program nor the address.
    static func bindTCPSocket(_ spec: String, shown: String, backlog: Int32) throws -> Int32 {
        guard let colon = spec.lastIndex(of: ":") else { throw FastCGIError("cannot listen on \(shown): not PATH, HOST:PORT or PORT") }
        let host = String(spec[..<colon]), portText = String(spec[spec.index(after: colon)...])
        guard !portText.isEmpty, portText.utf8.count <= 5, portText.utf8.allSatisfy({ (48...57).contains($0) }),
              let port = Int(portText), (1...65535).contains(port) else {
            throw FastCGIError("cannot listen on \(shown): the port must be a number from 1 to 65535")
        }
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var found: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, portText, &hints, &found)
        guard rc == 0, let first = found else {
            throw FastCGIError("cannot listen on \(shown): \(host) is not an IPv4 address or a name of one (\(String(cString: gai_strerror(rc))))")
        }
        defer { freeaddrinfo(found) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError("cannot listen on \(shown): \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw FastCGIError("cannot listen on \(shown): \(reason)")
        }
        return fd
    }

    /// The `sockaddr_un` of `path`; nil when the path does not fit.
    static func unixAddress(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        return address
    }

    /// The socket file `listen` made (device, inode), so that only that file is removed again.
    nonisolated(unsafe) static var boundSocket: (dev_t, ino_t)?

    /// Removes the socket file `listen` made, if it is still that file (not one another instance
    /// has made since). For a start that failed before serving.
    public static func removeBoundSocket(_ path: String) {
        var info = stat()
        guard let (dev, ino) = boundSocket, lstat(path, &info) == 0, info.st_dev == dev, info.st_ino == ino else { return }
        unlink(path)
    }

    /// Unlinks `path` if it is a socket no process accepts on; nothing there is fine.
    static func removeStaleSocket(_ path: String) throws {
        var info = stat()
        guard lstat(path, &info) == 0 else { return }
        guard info.st_mode & S_IFMT == S_IFSOCK else {
            throw FastCGIError("cannot listen on \(path): a file that is not a socket is there (left as it is)")
        }
        guard !acceptsConnections(path) else {
            throw FastCGIError("cannot listen on \(path): another process is serving that socket")
        }
        unlink(path)
    }

    /// True when a connection to the Unix socket at `path` succeeds.
    static func acceptsConnections(_ path: String) -> Bool {
        guard var address = unixAddress(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        } == 0
    }

    /// Serves requests on `listenFD` (0: the inherited socket) until SIGTERM or `maxRequests`.
    /// `after` runs once the response is fully handed to the web server (deferred work).
    /// `parameterNames`, when given, are the only parameters the handler sees: the rest of what
    /// the web server sends is skipped before any string is made of it.
    ///
    /// `idle` runs whenever no request has come for `idleSeconds` (0: never), or for the shorter
    /// time a sibling on the same socket wants, so deferred work of a worker that has gone quiet
    /// still gets done; it must do nothing that is not yet due. The wait costs nothing per
    /// request: the listening socket gets a receive timeout (`SO_RCVTIMEO`), which Linux applies
    /// to `accept`, which then fails with `EAGAIN` instead of blocking on.
    ///
    /// `bodySeconds` (0: no limit) bounds each wait for the next piece of a request, its head
    /// (the FastCGI records before the body) and its body: a peer that stops sending in the
    /// middle (a web server that passes bodies on as they arrive; anything else that can reach the
    /// socket) then costs that request a 400 or its connection, not the worker.
    ///
    /// Connections are accepted here, not by libfcgi, so each gets that receive timeout before
    /// libfcgi reads its head (libfcgi reads it inside `FCGX_Accept_r`, where a head that stopped
    /// half-way held the worker for as long as the peer kept the connection open). An answered
    /// connection is closed here with a bounded wait for the peer's end, one libfcgi closes (a
    /// failed head, a write error) at once: libfcgi's own close read until the peer stopped
    /// sending, 2 s a read. A web server that asks to keep the connection (`FCGI_KEEP_CONN`)
    /// keeps it, as libfcgi did, until it sits idle for `bodySeconds`.
    public static func serve(
        listenFD: Int32 = 0, maxRequests: Int = 0, parameterNames: [String]? = nil, idleSeconds: Int = 0,
        bodySeconds: Int = 0, handler: Handler, idle: () -> Void = {}, after: () -> Void
    ) throws {
        let wanted = parameterNames.map(ParameterFilter.init)
        guard FCGX_Init() == 0 else { throw FastCGIError("FCGX_Init failed") }
        installSignalHandlers()
        var request = FCGX_Request()
        // No listening socket for libfcgi: a connection whose head fails is closed by libfcgi,
        // whose own accept on -1 then fails at once (EBADF) and hands control back here.
        guard FCGX_InitRequest(&request, -1, Int32(FCGI_FAIL_ACCEPT_ON_INTR)) == 0 else {
            throw FastCGIError("FCGX_InitRequest failed")
        }
        // The option belongs to the socket, which every worker on it shares and which can
        // outlive us (systemd keeps it across restarts): the shortest interval any of them wants
        // is kept (`shortenReceiveTimeout`), so none loses its wake-up to a sibling started with
        // a longer interval or none; a wake-up that comes earlier than a worker's own interval
        // finds nothing due. A worker without an interval leaves the option as it is; a timeout
        // it did not ask for only makes it wait again (below).
        makeBlocking(listenFD)
        let timed = idleSeconds > 0 && shortenReceiveTimeout(listenFD, to: idleSeconds)
        let tcp = isTCP(listenFD)
        let allowedPeers = tcp ? webServerAddresses() : nil
        var served = 0
        var acceptFailureLoggedAt = Int64.min / 2
        // Set before the first check of the flag: a stop before this is seen by the check, one
        // after it replaces `listenFD` (the stop handler). This process never serves the socket
        // again after a stop; its siblings and the supervisor keep their own descriptors of it.
        if stopStandIn < 0 { stopStandIn = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0) }
        if stopStandIn >= 0 { listenFDForStop = listenFD }
        defer { listenFDForStop = -1 }
        #if DEBUG
        // Tests: a stop that lands between the check of the flag and `accept` after a request,
        // which no test could otherwise time.
        let stopBeforeAccept = getenv("CW_TEST_STOP_BEFORE_ACCEPT") != nil
        #endif
        while shutdownRequested == 0 {
            if request.ipcFd < 0 {
                #if DEBUG
                if stopBeforeAccept && served > 0 { raise(SIGTERM) }
                #endif
                let connection = accept(listenFD, nil, nil)
                if connection < 0 {
                    let error = errno
                    // Stopped: `listenFD` may be the stand-in now (EINVAL), or the wait was cut short.
                    if shutdownRequested != 0 { break }
                    // No request for the timeout: ours, or a shorter one another worker on the
                    // same socket set (workers started with different settings share it).
                    if error == EAGAIN || error == EWOULDBLOCK {
                        if timed {
                            // Two workers starting at once may both have read "none" and the longer
                            // interval written last: whichever wakes puts its own back if shorter.
                            _ = shortenReceiveTimeout(listenFD, to: idleSeconds)
                            idle()
                        }
                        continue
                    }
                    // With a receive timeout, Linux does not restart an accept interrupted by any
                    // signal, SIGSTOP/SIGCONT, a cgroup freeze or a debugger attaching included:
                    // only a stop signal (which sets the flag) ends the loop. A connection that went
                    // away before it was taken: go on.
                    // (Linux passes a new connection's pending network errors on through accept.)
                    if [EINTR, ECONNABORTED, EPROTO, EPERM, ECONNRESET, ETIMEDOUT, ENETDOWN, ENETUNREACH, EHOSTDOWN,
                        EHOSTUNREACH, ENONET, ENOPROTOOPT, EOPNOTSUPP].contains(error) { continue }
                    // Out of descriptors or memory (a burst, a leak elsewhere): wait and go on, where
                    // ending with status 0 left nothing to restart the worker under spawn-fcgi or
                    // --workers 1. Anything else is this socket's end: said, and an error status.
                    let reason = String(cString: strerror(error))
                    guard [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error) else {
                        throw FastCGIError("accepting a connection failed: \(reason)")
                    }
                    if MonotonicTime.milliseconds() - acceptFailureLoggedAt >= 10_000 {  // a line per 10 s at most
                        acceptFailureLoggedAt = MonotonicTime.milliseconds()
                        StandardErrorLog().write("weather-fcgi: accepting a connection failed (\(reason)); trying again every 0.1 s")
                    }
                    usleep(100_000)
                    continue
                }
                if tcp {
                    // What libfcgi's accept did for TCP: only the addresses in
                    // FCGI_WEB_SERVER_ADDRS, if set; and no Nagle delay, which held the last small
                    // write of a response on a kept connection for a delayed ACK (~40 ms).
                    if let allowedPeers, !allowedPeers.contains(peerIPv4(connection) ?? "") {
                        close(connection)
                        continue
                    }
                    var on: Int32 = 1
                    setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                }
                // Nothing within 2 s: dropped, as libfcgi dropped a silent Unix connection (the
                // web servers send the head at once). Then the timeout for each further wait (a
                // TCP connection inherits the listener's idle one).
                guard readable(connection, until: MonotonicTime.milliseconds() + 2000) else {
                    close(connection)
                    continue
                }
                _ = setReceiveTimeout(connection, seconds: bodySeconds)
                request.ipcFd = connection
            }
            // So that the finish `FCGX_Accept_r` starts with leaves the connection handed to it open;
            // and a connection libfcgi closes itself (a head that failed; a write error at the
            // finish) is closed without its unbounded drain, which a peer that kept sending a
            // byte now and then could stretch without end (`FCGX_Free` resets it after a close).
            request.keepConnection = 1
            request.detached = 1
            // The head: libfcgi's own accept never runs (the connection is there), so an error is
            // a head that did not come (timed out, cut off, not FastCGI); libfcgi closed it.
            guard FCGX_Accept_r(&request) >= 0 else { continue }
            let webServerKeepsConnection = request.keepConnection != 0  // its FCGI_KEEP_CONN
            let params = environment(request.envp, keeping: wanted)
            let input = request.in
            let response = handler(params) { count in readStream(input, count) }
            put(response.cgiHead(), to: request.out)
            if params["REQUEST_METHOD"] != "HEAD" { put(response.body, to: request.out) }
            // Closed below, in bounded time; libfcgi closes it on a write error, without its drain
            // (`detached` stays set: nothing but a close resets it).
            request.keepConnection = 1
            FCGX_Finish_r(&request)
            if !webServerKeepsConnection && request.ipcFd >= 0 {
                closeConnection(request.ipcFd, waitingAtMostMilliseconds: 1000)
                request.ipcFd = -1
            }
            after()
            served += 1
            if maxRequests > 0 && served >= maxRequests { break }
        }
        if request.ipcFd >= 0 {
            closeConnection(request.ipcFd, waitingAtMostMilliseconds: 1000)
            request.ipcFd = -1
        }
        FCGX_Free(&request, 1)
    }

    /// Closes a connection whose response is complete: stops sending, then waits (at most
    /// `milliseconds` in all) for the peer to close its end, reading what it still sends, so that
    /// unread bytes do not turn the close into a reset that could cost the peer the end of the
    /// response.
    static func closeConnection(_ fd: Int32, waitingAtMostMilliseconds milliseconds: Int64) {
        if shutdown(fd, Int32(SHUT_WR)) == 0 {
            let deadline = MonotonicTime.milliseconds() + milliseconds
            // On the stack, not zeroed: this runs once a request.
            withUnsafeTemporaryAllocation(byteCount: 1024, alignment: 1) { trash in
                while readable(fd, until: deadline) {
                    let n = recv(fd, trash.baseAddress, trash.count, Int32(MSG_DONTWAIT))
                    if n > 0 { continue }
                    if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
                    break  // the peer's end, or an error
                }
            }
        }
        close(fd)
    }

    /// Clears `O_NONBLOCK` on `fd` if something set it: a non-blocking listener would make every
    /// accept return at once (a busy loop with a timeout, an exit without one).
    static func makeBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 && flags & O_NONBLOCK != 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
    }

    /// `SO_RCVTIMEO` of `fd`; 0 removes it. False when the option cannot be set (not a socket).
    static func setReceiveTimeout(_ fd: Int32, seconds: Int) -> Bool {
        var timeout = timeval(tv_sec: seconds, tv_usec: 0)
        return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0
    }

    /// Removes a receive timeout an earlier instance left on the listening socket `fd` (systemd
    /// keeps the socket across restarts, and workers only ever shorten it, see `serve`). Only for
    /// the one process that holds the socket before any worker serves it: a supervisor at start.
    public static func clearIdleInterval(_ fd: Int32) {
        _ = setReceiveTimeout(fd, seconds: 0)
    }

    /// Sets `SO_RCVTIMEO` of `fd` to `seconds` unless it already has a timeout no longer than
    /// that. False when the option cannot be read or set (not a socket).
    static func shortenReceiveTimeout(_ fd: Int32, to seconds: Int) -> Bool {
        var current = timeval()
        var length = socklen_t(MemoryLayout<timeval>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &current, &length) == 0 else { return false }
        let set = current.tv_sec > 0 || current.tv_usec > 0
        if set && (current.tv_sec < seconds || current.tv_sec == seconds && current.tv_usec == 0) { return true }
        return setReceiveTimeout(fd, seconds: seconds)
    }

    /// True when `fd` is an IPv4 or IPv6 socket.
    static func isTCP(_ fd: Int32) -> Bool {
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return named == 0 && (Int32(address.ss_family) == AF_INET || Int32(address.ss_family) == AF_INET6)
    }

    /// libfcgi's `FCGI_WEB_SERVER_ADDRS`: the IPv4 addresses (comma-separated) a TCP listener
    /// takes connections from; nil when unset (everyone). When it is set an IPv6 peer is refused
    /// (libfcgi, which knows IPv4 only, let one through unchecked).
    static func webServerAddresses() -> Set<String>? {
        guard let raw = getenv("FCGI_WEB_SERVER_ADDRS") else { return nil }
        return Set(String(cString: raw).split(separator: ",").map { String($0.filter { $0 != " " }) }.filter { !$0.isEmpty })
    }

    /// The dotted IPv4 address of the peer of `fd`; nil for another family.
    static func peerIPv4(_ fd: Int32) -> String? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard named == 0, Int32(address.sin_family) == AF_INET else { return nil }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        guard inet_ntop(AF_INET, &address.sin_addr, &text, socklen_t(text.count)) != nil else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func put(_ bytes: [UInt8], to stream: UnsafeMutablePointer<FCGX_Stream>?) {
        guard !bytes.isEmpty else { return }
        _ = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { FCGX_PutStr($0.baseAddress, Int32($0.count), stream) }
        }
    }

    /// Plain CGI: the request is the process environment and stdin; the response goes to stdout.
    /// The body is read for at most `bodySeconds` in all (0: no limit); what has come by then is
    /// the body (shorter than announced: a 400).
    public static func serveCGI(bodySeconds: Int = 0, handler: Handler) {
        var params = CGIParameters()
        var p = environ
        while let entry = p.pointee {
            addParameter(entry, to: &params)
            p += 1
        }
        let deadline = MonotonicTime.milliseconds() + Int64(bodySeconds) * 1000
        var consumed = 0, stalled = false
        let response = handler(params) { count in
            var out = [UInt8](repeating: 0, count: count)
            var got = 0
            while got < count {
                if bodySeconds > 0 && !readable(0, until: deadline) {
                    stalled = true
                    break
                }
                let n = out.withUnsafeMutableBytes { read(0, $0.baseAddress! + got, count - got) }
                if n <= 0 { break }
                got += n
            }
            consumed += got
            return Array(out.prefix(got))
        }
        let bytes = response.cgiBytes(includeBody: params["REQUEST_METHOD"] != "HEAD")
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(1, $0.baseAddress! + written, bytes.count - written) }
            if n <= 0 { break }
            written += n
        }
        // A body that stopped coming is not waited for again.
        if !stalled { drainUnreadBody(declared: Int(params["CONTENT_LENGTH"] ?? "") ?? 0, consumed: consumed) }
    }

    /// Reads what is left of a body the handler did not read (one it refused for its size), up to
    /// 1 MiB and for at most 2 s, before the process exits: a CGI whose standard input is a socket
    /// (mod_cgid) and that exits with data unread there makes the kernel reset it, and Apache
    /// then lost the answer already written (a 413 for a 5,000-byte body, now and then) and
    /// dropped the client's connection without a word.
    static func drainUnreadBody(declared: Int, consumed: Int) {
        var left = min(declared - consumed, 1 << 20)
        guard left > 0 else { return }
        let deadline = MonotonicTime.milliseconds() + 2000
        var sink = [UInt8](repeating: 0, count: 16384)
        while left > 0, readable(0, until: deadline) {
            let n = sink.withUnsafeMutableBytes { read(0, $0.baseAddress, min(left, 16384)) }
            if n <= 0 { break }
            left -= n
        }
    }

    /// Waits until `fd` has something to read (or its end), at most until `deadline`
    /// (`MonotonicTime.milliseconds()`); false when the time ran out first.
    static func readable(_ fd: Int32, until deadline: Int64) -> Bool {
        while true {
            let left = deadline - MonotonicTime.milliseconds()
            guard left > 0 else { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready > 0 { return true }
            if ready == 0 || errno != EINTR { return ready != 0 }
        }
    }

    static func environment(_ envp: FCGX_ParamArray?, keeping wanted: ParameterFilter? = nil) -> CGIParameters {
        var params = CGIParameters()
        guard var p = envp else { return params }
        while let entry = p.pointee {
            addParameter(entry, to: &params, keeping: wanted)
            p += 1
        }
        return params
    }

    /// Splits one `NAME=value` C string at its first `=` on bytes (no Character walking: this runs
    /// for every parameter of every request). Invalid UTF-8 is repaired to U+FFFD here and refused
    /// by the request parser.
    static func addParameter(_ entry: UnsafeMutablePointer<CChar>, to params: inout CGIParameters, keeping wanted: ParameterFilter? = nil) {
        let length = strlen(entry)
        entry.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            let all = UnsafeBufferPointer(start: bytes, count: length)
            guard let eq = all.firstIndex(of: UInt8(ascii: "=")) else { return }
            let nameBytes = UnsafeBufferPointer(rebasing: all[..<eq])
            let name: String
            if let wanted {
                guard let kept = wanted.keptName(nameBytes) else { return }
                name = kept
            } else {
                name = String(decoding: nameBytes, as: UTF8.self)
            }
            params.append(name, String(decoding: UnsafeBufferPointer(rebasing: all[(eq + 1)...]), as: UTF8.self))
        }
    }

    static func readStream(_ stream: UnsafeMutablePointer<FCGX_Stream>?, _ count: Int) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let got = out.withUnsafeMutableBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { FCGX_GetStr($0.baseAddress, Int32(count), stream) }
        }
        return Array(out.prefix(Int(max(0, got))))
    }

    /// Catches the stop signals into `shutdownRequested`. Call it first thing in `main`: a SIGTERM
    /// that arrives while the program is still starting must stop it cleanly, not be lost or kill
    /// it half-way. Idempotent.
    public static func installSignalHandlers() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            shutdownRequested = 1
            // dup2 is async-signal-safe; errno is kept for the code this interrupted.
            if listenFDForStop >= 0 {
                let saved = errno
                dup2(stopStandIn, listenFDForStop)
                errno = saved
            }
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: accept() must return EINTR so the loop can end
        sigaction(SIGTERM, &action, nil)
        sigaction(SIGINT, &action, nil)
        sigaction(SIGUSR1, &action, nil)  // Apache's mod_fcgid graceful stop
        // A hang-up (the terminal of a start by hand closing) stops as gracefully, so what a
        // worker counted is written; unless it came ignored (`nohup`), which is kept.
        if cfastcgi_signal_is_ignored(SIGHUP) == 0 { sigaction(SIGHUP, &action, nil) }
        signal(SIGPIPE, SIG_IGN)
        unblockStopSignals()
    }

    /// Descriptors a worker holds before it takes a connection: standard streams, the socket,
    /// the database, its `-wal`, `-shm` and `-writer`, the checkpointer's connection, and one
    /// for a provider call, with room to spare.
    public static let descriptorsNeeded: rlim_t = 32

    /// Raises the soft limit on open files towards the hard one (to 1024 at most) and nil when
    /// `descriptorsNeeded` are then allowed; else why not, for the start-up error. Under
    /// `ulimit -n 8` a worker started and then could take no connection: each `accept` failed
    /// (EMFILE) and was retried every 0.1 s while the web server waited out its timeout, health
    /// included (an operations audit).
    public static func ensureDescriptors() -> String? {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let wanted: rlim_t = 1024
        if limit.rlim_cur < wanted && limit.rlim_max > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = min(limit.rlim_max, wanted)
            if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        guard limit.rlim_cur < descriptorsNeeded else { return nil }
        return "the open-file limit is \(limit.rlim_cur) (ulimit -n, systemd LimitNOFILE=, or the host's cap); a worker needs at least \(descriptorsNeeded)"
    }

    /// One malloc arena: a worker serves one request at a time, and every extra arena (the provider
    /// client's name-lookup thread would get one) keeps free pages of its own.
    public static func useOneMallocArena() { mallopt(M_ARENA_MAX, 1) }

    /// Hands freed heap pages back to the kernel, so that a burst of large bodies does not stay
    /// in the worker's RSS for good. A few microseconds; call it now and then, not per request.
    public static func trimHeap() { malloc_trim(0) }

    /// True once a stop signal has arrived.
    public static var stopRequested: Bool { shutdownRequested != 0 }

    /// Stops the serve loop as a SIGTERM would: the request in hand (none, when idle) is finished.
    public static func requestStop() { raise(SIGTERM) }

    /// Whether this process was started by Apache (mod_fcgid, its parent), which starts a program
    /// file anew once it changes but keeps the processes of the old file: up to
    /// `FcgidMinProcessesPerClass` (3 by default) of them for as long as Apache runs.
    /// Told by the inherited socket, which mod_fcgid names `<pid>.<n>` in its `FcgidIPCDir`, or
    /// by the parent's name in `/proc/<parent>/comm` (its `exe` is not readable
    /// by a worker running as another user; and under `hidepid`, as on many suEXEC hosts, not
    /// even `comm` is, which is why the socket is asked first).
    public static func startedByApache(listenFD: Int32 = 0) -> Bool {
        // mod_fcgid names each socket `<pid>.<n>` (in its FcgidIPCDir); a spawn-fcgi or systemd
        // socket is named by its operator (`weather.sock`), and its workers must not retire:
        // nothing would start them again.
        if let path = unixSocketPath(listenFD), let name = path.split(separator: "/").last, Self.isModFcgidSocketName(name) { return true }
        let fd = open("/proc/\(getppid())/comm", O_RDONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, 32) }
        guard n > 0 else { return false }
        let name = String(decoding: buffer[0..<n].prefix { $0 != 10 }, as: UTF8.self)
        return ["apache2", "httpd", "httpd2", "apache", "httpd-prefork", "httpd-worker", "httpd-event"].contains(name)
    }

    /// `<digits>.<digits>`, as mod_fcgid names its sockets.
    static func isModFcgidSocketName(_ name: Substring) -> Bool {
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (48...57).contains($0) } }
    }

    /// The path a Unix socket `fd` is bound to; nil for anything else.
    static func unixSocketPath(_ fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0, Int32(address.sun_family) == AF_UNIX else { return nil }
        return withUnsafeBytes(of: &address.sun_path) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
        }
    }

    /// Whether the file this process runs has been replaced or removed since it started (an
    /// upgrade renamed a new program over it): Linux then shows the old one as `(deleted)`.
    public static func programReplaced() -> Bool {
        executablePath(of: "self")?.hasSuffix(" (deleted)") ?? false
    }

    /// The target of `/proc/<process>/exe`; nil when it cannot be read.
    static func executablePath(of process: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let n = readlink("/proc/\(process)/exe", &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A parent may start us with these blocked (Foundation's `Process` does); a blocked SIGTERM
    /// would never arrive and every stop would end in SIGKILL.
    static func unblockStopSignals() {
        var set = sigset_t()
        sigemptyset(&set)
        for s in [SIGTERM, SIGINT, SIGUSR1, SIGHUP] { sigaddset(&set, s) }
        sigprocmask(SIG_UNBLOCK, &set, nil)
    }
}

/// A short list of parameter names, matched on raw bytes.
struct ParameterFilter {
    let names: [String]
    private let bytes: [[UInt8]]
    init(_ names: [String]) {
        self.names = names
        bytes = names.map { Array($0.utf8) }
    }

    /// The kept name spelled `name`, the same string for every request instead of one decoded
    /// (and, past 15 bytes, allocated) each time; nil when the parameter is not kept.
    func keptName(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        for (i, b) in bytes.enumerated() where b.count == name.count && b.elementsEqual(name) { return names[i] }
        return nil
    }
}

/// A FastCGI set-up failure, for the start-up message.
public struct FastCGIError: Error, CustomStringConvertible {
    public let description: String
    init(_ d: String) { description = d }
}
