#if canImport(Glibc)
import Glibc
#endif

/// Binding a listening socket (`--listen`), and the socket options serving depends on.
extension FastCGIServer {
    /// Binds `address` and returns its descriptor: `/path/to.sock`, `host:port`, or `port` (or
    /// `:port`), which is 127.0.0.1 (libfcgi would take every interface: anyone who reaches the
    /// port could send any `REMOTE_ADDR`; say `0.0.0.0:port` for that).
    ///
    /// A path is taken over only from a socket nothing listens on any more (left by a process
    /// that died); a live socket (another instance) or any other file there is an error, and
    /// stays as it was.
    public static func listen(_ address: String, mode: mode_t = 0o660, backlog: Int32 = 128) throws -> Int32 {
        // A relative path (`weather.sock`, `run/w.sock`) is neither a port nor HOST:PORT: said so,
        // without repeating it (API.md: no file path in a log line; it was echoed as a bad port).
        if !address.hasPrefix("/"), !address.contains(":"), address.contains(where: { $0 == "/" || $0 == "." || $0.isLetter }) {
            throw FastCGIError("cannot listen on the --listen value: a PATH must be absolute (otherwise HOST:PORT or PORT)")
        }
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
    /// never open to more than `mode` allows. Errors name the path by its role, not as text
    /// (API.md: no file path in a log line); the operator typed it.
    static func bindUnixSocket(_ path: String, backlog: Int32) throws -> Int32 {
        guard var address = unixAddress(path) else { throw FastCGIError("cannot listen on the --listen path: the path is too long for a socket") }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw FastCGIError("cannot listen on the --listen path: \(String(cString: strerror(errno)))") }
        let previous = umask(0o177)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        umask(previous)
        guard bound == 0, Glibc.listen(fd, backlog) == 0 else {
            let reason = errno == EADDRINUSE ? "another process made that socket meanwhile" : String(cString: strerror(errno))
            close(fd)
            throw FastCGIError("cannot listen on the --listen path: \(reason)")
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
            let port = Int(portText), (1...65535).contains(port)
        else {
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
            throw FastCGIError("cannot listen on the --listen path: a file that is not a socket is there (left as it is)")
        }
        guard !acceptsConnections(path) else {
            throw FastCGIError("cannot listen on the --listen path: another process is serving that socket")
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

    /// Clears `O_NONBLOCK` on `fd` if something set it: a non-blocking listener would make every
    /// accept return at once (a busy loop with a timeout, an exit without one).
    static func makeBlocking(_ fd: Int32) {
        let flags = fcntl(fd, F_GETFL)
        if flags >= 0 && flags & O_NONBLOCK != 0 { _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) }
    }

    /// `SO_RCVTIMEO` of `fd`; 0 removes it. False when the option cannot be set (not a socket).
    static func setReceiveTimeout(_ fd: Int32, seconds: Int) -> Bool {
        setTimeout(fd, SO_RCVTIMEO, timeval(tv_sec: seconds, tv_usec: 0))
    }

    /// `SO_SNDTIMEO` of `fd`; 0 removes it. A write that waits longer for the peer to take more
    /// then fails, which libfcgi treats as a broken connection and closes.
    static func setSendTimeout(_ fd: Int32, seconds: Int) -> Bool {
        setTimeout(fd, SO_SNDTIMEO, timeval(tv_sec: seconds, tv_usec: 0))
    }

    /// `SO_RCVTIMEO` of `fd` in milliseconds (at least one).
    static func setReceiveTimeout(_ fd: Int32, milliseconds: Int64) -> Bool {
        let ms = max(milliseconds, 1)
        return setTimeout(fd, SO_RCVTIMEO, timeval(tv_sec: Int(ms / 1000), tv_usec: Int(ms % 1000) * 1000))
    }

    private static func setTimeout(_ fd: Int32, _ option: Int32, _ timeout: timeval) -> Bool {
        var timeout = timeout
        return setsockopt(fd, SOL_SOCKET, option, &timeout, socklen_t(MemoryLayout<timeval>.size)) == 0
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
}
