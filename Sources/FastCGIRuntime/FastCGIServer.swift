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
    /// `bodySeconds` (0: no limit) bounds the wait for a request to come whole once it has begun
    /// to (`RequestScreen`), its head (the FastCGI records before the body) and its body: a peer
    /// that stops sending in the middle (a web server that passes bodies on as they arrive;
    /// anything else that can reach the socket) then costs that request a 400 or its connection,
    /// not the worker; and each wait for a kept connection's next request. It also bounds
    /// each wait for the peer to take more of what the worker writes (`SO_SNDTIMEO`): a peer
    /// that stopped reading (a stalled web server; anything on the socket that asks for answers
    /// and never reads them) held the worker for as long as it kept the connection open.
    ///
    /// Connections are accepted here, not by libfcgi, so each gets that receive timeout before
    /// libfcgi reads its head (libfcgi reads it inside `FCGX_Accept_r`, where a head that stopped
    /// half-way held the worker for as long as the peer kept the connection open). An answered
    /// connection is closed here with a bounded wait for the peer's end, one libfcgi closes (a
    /// failed head, a write error) at once: libfcgi's own close read until the peer stopped
    /// sending, 2 s a read. A web server that asks to keep the connection (`FCGI_KEEP_CONN`)
    /// keeps it, as libfcgi did, until it sits idle for `bodySeconds`. What goes wrong around
    /// the requests (accepting connections) is reported to `log`.
    public static func serve(
        listenFD: Int32 = 0, maxRequests: Int = 0, parameterNames: [String]? = nil, idleSeconds: Int = 0,
        bodySeconds: Int = 0, log: any LogSink, handler: Handler, idle: () -> Void = {}, after: () -> Void
    ) throws {
        let wanted = parameterNames.map(ParameterFilter.init)
        guard FCGX_Init() == 0 else { throw FastCGIError("FCGX_Init failed") }
        installSignalHandlers()
        var request = FCGX_Request()
        let screen = RequestScreen()
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
        let peers = isTCP(listenFD) ? TCPPeers(allowed: webServerAddresses()) : nil
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
        serving: while shutdownRequested == 0 {
            if request.ipcFd < 0 {
                #if DEBUG
                if stopBeforeAccept && served > 0 { raise(SIGTERM) }
                #endif
                switch try acceptConnection(
                    on: listenFD, idleSeconds: timed ? idleSeconds : 0, peers: peers, idle: idle,
                    lastFailureLogged: &acceptFailureLoggedAt, log: log)
                {
                case .connection(let connection):
                    _ = setReceiveTimeout(connection, seconds: bodySeconds)
                    _ = setSendTimeout(connection, seconds: bodySeconds)
                    request.ipcFd = connection
                case .nothing:
                    continue
                case .stopped:
                    break serving
                }
            }
            // So that the finish `FCGX_Accept_r` starts with leaves the connection handed to it open;
            // and a connection libfcgi closes itself (a head that failed; a write error at the
            // finish) is closed without its unbounded drain, which a peer that kept sending a
            // byte now and then could stretch without end (`FCGX_Free` resets it after a close).
            request.keepConnection = 1
            request.detached = 1
            // Nothing reaches libfcgi before the screen has seen it (`RequestScreen`).
            var bodyLimit = Int.max
            switch screen.screen(request.ipcFd, waitSeconds: bodySeconds) {
            case .whole: break
            case .headAndBody(let bytes): bodyLimit = bytes
            case .drop:
                close(request.ipcFd)
                request.ipcFd = -1
                continue
            }
            // The head: libfcgi's own accept never runs (the connection is there), so an error is
            // a head that did not come (timed out, cut off, not FastCGI); libfcgi closed it.
            guard FCGX_Accept_r(&request) >= 0 else { continue }
            // A body cut short is read only as far as it was screened, and its connection ends.
            let webServerKeepsConnection = request.keepConnection != 0 && bodyLimit == Int.max  // its FCGI_KEEP_CONN
            let params = environment(request.envp, keeping: wanted)
            let input = request.in
            var bodyLeft = bodyLimit
            let response = handler(params) { count in
                let bytes = readStream(input, min(count, bodyLeft))
                bodyLeft -= bytes.count
                return bytes
            }
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

    /// What one `accept` on the listening socket came to.
    enum Accepted {
        /// A connection whose peer has sent something, ready for libfcgi to read its head.
        case connection(Int32)
        /// Nothing to serve: the receive timeout (after `idle`), a connection that went away or
        /// was refused, a wait after running out of descriptors.
        case nothing
        /// A stop signal ended the wait.
        case stopped
    }

    /// TCP listeners only: the peers FCGI_WEB_SERVER_ADDRS allows (nil: any).
    struct TCPPeers {
        var allowed: Set<String>?
    }

    /// One `accept` on `listenFD`, with what libfcgi's accept did around it. `idleSeconds` (0:
    /// none) is this worker's idle interval, put back on the shared socket if shorter than what
    /// it holds.
    static func acceptConnection(
        on listenFD: Int32, idleSeconds: Int, peers: TCPPeers?, idle: () -> Void,
        lastFailureLogged acceptFailureLoggedAt: inout Int64, log: any LogSink
    ) throws -> Accepted {
        let connection = accept(listenFD, nil, nil)
        if connection < 0 {
            let error = errno
            // Stopped: `listenFD` may be the stand-in now (EINVAL), or the wait was cut short.
            if shutdownRequested != 0 { return .stopped }
            // No request for the timeout: ours, or a shorter one another worker on the
            // same socket set (workers started with different settings share it).
            if error == EAGAIN || error == EWOULDBLOCK {
                if idleSeconds > 0 {
                    // Two workers starting at once may both have read "none" and the longer
                    // interval written last: whichever wakes puts its own back if shorter.
                    _ = shortenReceiveTimeout(listenFD, to: idleSeconds)
                    idle()
                }
                return .nothing
            }
            // With a receive timeout, Linux does not restart an accept interrupted by any
            // signal, SIGSTOP/SIGCONT, a cgroup freeze or a debugger attaching included:
            // only a stop signal (which sets the flag) ends the loop. A connection that went
            // away before it was taken: go on.
            // (Linux passes a new connection's pending network errors on through accept.)
            if [
                EINTR, ECONNABORTED, EPROTO, EPERM, ECONNRESET, ETIMEDOUT, ENETDOWN, ENETUNREACH, EHOSTDOWN,
                EHOSTUNREACH, ENONET, ENOPROTOOPT, EOPNOTSUPP,
            ].contains(error) {
                return .nothing
            }
            // Out of descriptors or memory (a burst, a leak elsewhere): wait and go on, where
            // ending with status 0 left nothing to restart the worker under spawn-fcgi or
            // --workers 1. Anything else is this socket's end: said, and an error status.
            let reason = String(cString: strerror(error))
            guard [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error) else {
                throw FastCGIError("accepting a connection failed: \(reason)")
            }
            if MonotonicTime.milliseconds() - acceptFailureLoggedAt >= 10_000 {  // a line per 10 s at most
                acceptFailureLoggedAt = MonotonicTime.milliseconds()
                log.write("weather-fcgi: accepting a connection failed (\(reason)); trying again every 0.1 s")
            }
            usleep(100_000)
            return .nothing
        }
        if let peers {
            // What libfcgi's accept did for TCP: only the addresses in
            // FCGI_WEB_SERVER_ADDRS, if set; and no Nagle delay, which held the last small
            // write of a response on a kept connection for a delayed ACK (~40 ms).
            if let allowed = peers.allowed, !allowed.contains(peerIPv4(connection) ?? "") {
                close(connection)
                return .nothing
            }
            var on: Int32 = 1
            setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        // Urgent data (`MSG_OOB`, TCP and since Linux 5.15 Unix sockets) in line: otherwise a
        // peek and `read` can disagree about the byte at the urgent mark (a TCP peek skips it and
        // `read` may not; a Unix peek from a peek offset returns it and `read` skips it), and the
        // request screen and libfcgi would see different bytes.
        var inline: Int32 = 1
        setsockopt(connection, SOL_SOCKET, SO_OOBINLINE, &inline, socklen_t(MemoryLayout<Int32>.size))
        // Nothing within 2 s: dropped, as libfcgi dropped a silent Unix connection (the
        // web servers send the head at once). Then the timeout for each further wait (a
        // TCP connection inherits the listener's idle one).
        guard readable(connection, until: MonotonicTime.milliseconds() + 2000) else {
            close(connection)
            return .nothing
        }
        return .connection(connection)
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

    static func put(_ bytes: [UInt8], to stream: UnsafeMutablePointer<FCGX_Stream>?) {
        guard !bytes.isEmpty else { return }
        _ = bytes.withUnsafeBufferPointer { buf in
            buf.withMemoryRebound(to: CChar.self) { FCGX_PutStr($0.baseAddress, Int32($0.count), stream) }
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
}
