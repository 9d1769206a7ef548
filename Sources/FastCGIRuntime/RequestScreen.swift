import CFastCGI
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
/// its head (the records up to its empty `FCGI_PARAMS`) is not whole within `RecordWalk.limit`
/// bytes of records or within the wait given, or when its peer ends the connection first. A body
/// not whole within the wait, or going on past `RecordWalk.limit`, after a whole head is given to
/// libfcgi as far as it came (`headAndBody`): the handler answers 400 for a missing part, as it
/// did when libfcgi waited for it, and 413 for a `Content-Length` over its limit. (A body over
/// the limit was dropped unanswered until session 25: mod_fcgid, which passes a chunked body of
/// up to 128 KiB on with its length, took the closed connection for a broken worker, answered
/// 500 and killed the worker; a review.) What the handler does not read is drained, unread by
/// libfcgi, when the connection is closed.
struct RequestScreen: ~Copyable {
    enum Verdict {
        /// The whole request has come: libfcgi may read all of it.
        case whole
        /// The head has come and `bodyBytes` of the body, then nothing more within a wait:
        /// libfcgi may read the head and that much of the body, nothing after it.
        case headAndBody(Int)
        /// Close the connection without an answer.
        case drop
    }

    #if DEBUG
    static let noPeekOffsetForTests = getenv("CW_TEST_NO_PEEK_OFFSET") != nil
    #endif

    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: RecordWalk.limit, alignment: 8)

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
        // Without a peek offset (TCP before Linux 6.10) a peek cannot wait for bytes past those
        // it has seen: then the screen looks again from the start every 2 ms.
        var rescan = false
        while true {
            guard have < RecordWalk.limit else { return walk.headWhole ? .headAndBody(walk.bodyBytes) : .drop }
            let got: Int  // bytes new to the screen, or -1 (errno)
            if rescan {
                usleep(2_000)
                if shutdownRequested != 0 { return .drop }
                let all = recv(fd, buffer.baseAddress!, RecordWalk.limit, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
                if all == 0 { return .drop }
                got = all < 0 ? -1 : all - have
            } else {
                got = recv(fd, buffer.baseAddress! + have, RecordWalk.limit - have, Int32(MSG_PEEK))
                if got == 0 { return .drop }
            }
            if got > 0 {
                have += got
                switch walk.walk(UnsafeRawBufferPointer(rebasing: buffer[0..<have])) {
                case .whole: return .whole
                case .drop: return .drop
                case .more: break
                }
            } else if got < 0 && (errno != EINTR || shutdownRequested != 0) {
                // The wait ran out (or the connection broke, or a stop signal came).
                return walk.headWhole && (errno == EAGAIN || errno == EWOULDBLOCK) ? .headAndBody(walk.bodyBytes) : .drop
            }
            // More to come (or an interruption: wait on, for what is left of the time). From here
            // on a peek starts after what was peeked, and waits for it.
            if !offsetKept && !rescan {
                if Self.setPeekOffset(fd, Int32(have)) { offsetKept = true } else { rescan = true }
            }
            if waitSeconds > 0 {
                let now = MonotonicTime.milliseconds()
                let deadline = wholeBy ?? now + Int64(waitSeconds) * 1000
                wholeBy = deadline
                guard deadline > now else { return walk.headWhole ? .headAndBody(walk.bodyBytes) : .drop }
                if !rescan {
                    timeoutShortened = FastCGIServer.setReceiveTimeout(fd, milliseconds: deadline - now) || timeoutShortened
                }
            }
        }
    }

    /// `SO_PEEK_OFF`: where the next `MSG_PEEK` starts (and that it waits for bytes past it);
    /// -1 turns it off (a peek starts at the read position).
    private static func setPeekOffset(_ fd: Int32, _ offset: Int32) -> Bool {
        #if DEBUG
        // Tests: a kernel without a peek offset for the socket (TCP before Linux 6.10).
        if offset >= 0 && noPeekOffsetForTests { return false }
        #endif
        var value = offset
        return setsockopt(fd, SOL_SOCKET, SO_PEEK_OFF, &value, socklen_t(MemoryLayout<Int32>.size)) == 0
    }
}
