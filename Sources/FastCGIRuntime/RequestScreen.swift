import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Looks at a request's FastCGI records before libfcgi reads any of them, and lets libfcgi read
/// only records it has looked at.
///
/// libfcgi reads every record wherever it comes in a request, and some it answers by itself:
/// an `FCGI_GET_VALUES` record (request id 0) that names a variable four times overflowed the
/// 64-byte stack buffer libfcgi builds its answer in and killed the worker (Debian's 2.4.2). It
/// also keeps every parameter of a head without end, and a head that comes a byte at a time held
/// the worker for as long as it trickled. So the records are peeked at (`MSG_PEEK`, nothing
/// consumed) until the request is whole, its empty `FCGI_STDIN` record, and then libfcgi reads
/// it. Web servers never send management records and send a request's head at once; nginx sends
/// the whole request at once, so the usual cost is one `recv` a request.
///
/// A request is dropped (its connection closed, no answer) when it is not one responder request
/// on one request id (`FCGI_BEGIN_REQUEST`, `FCGI_PARAMS` to their end, `FCGI_STDIN` to its end:
/// what nginx and Apache send; no management record, other role, other id or record type), when
/// it takes more than `limit` bytes of records before it is whole, when its head (the
/// records up to its empty `FCGI_PARAMS`) is not whole within the wait given, or when its peer
/// ends the connection first. A body not whole within the wait after a whole head is given to
/// libfcgi as far as it came (`headAndBody`): the handler answers 400 for the missing part, as
/// it did when libfcgi waited for it.
struct RequestScreen: ~Copyable {
    /// The most bytes of records one request may take: a head of nginx's largest headers (4 ×
    /// 8 KiB) with its FastCGI framing, plus the 4 KiB body the gateway reads, with room to
    /// spare; under the send buffer of a Unix socket (about 200 KB), so a request this long can
    /// be whole in the socket before libfcgi reads any of it.
    static let limit = RecordWalk.limit

    enum Verdict: Equatable {
        /// The whole request has come: libfcgi may read all of it.
        case whole
        /// The head has come and `bodyBytes` of the body, then nothing more within a wait:
        /// libfcgi may read the head and that much of the body, nothing after it.
        case headAndBody(Int)
        /// Close the connection without an answer.
        case drop
        /// The socket cannot keep a peek offset (a TCP socket on a kernel before 6.10): the
        /// request goes to libfcgi unscreened, as before.
        case unscreened
    }

    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: RequestScreen.limit, alignment: 8)

    deinit { buffer.deallocate() }

    /// Peeks at `fd` until the request that starts at its read position is whole or is dropped.
    /// `waitSeconds` (0: no limit) bounds the wait for the whole request from the first look that
    /// finds it incomplete (before that, the first wait is the connection's receive timeout,
    /// which is what it is set to: a kept connection's idle time).
    func screen(_ fd: Int32, waitSeconds: Int) -> Verdict {
        var have = 0
        var walk = RecordWalk()
        var wholeBy: Int64?
        var offsetKept = false
        var timeoutShortened = false
        defer {
            // A kept connection's next request starts where libfcgi stops reading; its screen
            // peeks from there again.
            if offsetKept { _ = Self.setPeekOffset(fd, -1) }
            if timeoutShortened { _ = FastCGIServer.setReceiveTimeout(fd, seconds: waitSeconds) }
        }
        while true {
            guard have < Self.limit else { return .drop }
            let n = recv(fd, buffer.baseAddress! + have, Self.limit - have, Int32(MSG_PEEK))
            if n == 0 { return .drop }
            if n > 0 {
                have += n
                switch walk.walk(UnsafeRawBufferPointer(rebasing: buffer[0..<have])) {
                case .whole: return .whole
                case .drop: return .drop
                case .more: break
                }
            } else if errno != EINTR || shutdownRequested != 0 {
                // The wait ran out (or the connection broke, or a stop signal came).
                return walk.headWhole && (errno == EAGAIN || errno == EWOULDBLOCK) ? .headAndBody(walk.bodyBytes) : .drop
            }
            // Any other interruption waits on, for what is left of the time.
            // More to come. From here on a peek starts after what was peeked, and waits for it.
            if !offsetKept {
                guard Self.setPeekOffset(fd, Int32(have)) else { return .unscreened }
                offsetKept = true
            }
            if waitSeconds > 0 {
                let now = MonotonicTime.milliseconds()
                let deadline = wholeBy ?? now + Int64(waitSeconds) * 1000
                wholeBy = deadline
                guard deadline > now else { return walk.headWhole ? .headAndBody(walk.bodyBytes) : .drop }
                timeoutShortened = FastCGIServer.setReceiveTimeout(fd, milliseconds: deadline - now) || timeoutShortened
            }
        }
    }

    /// `SO_PEEK_OFF`: where the next `MSG_PEEK` starts (and that it waits for bytes past it);
    /// -1 turns it off (a peek starts at the read position).
    private static func setPeekOffset(_ fd: Int32, _ offset: Int32) -> Bool {
        var value = offset
        return setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
    }
}
