import WeatherAPI
import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Plain CGI: one request from the process environment and standard input.
extension FastCGIServer {
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
        if !stalled { drainUnreadBody(declared: declaredBodyLength(params), consumed: consumed) }
    }

    /// The body's length as the web server gave it; nil for one read to its end (a chunked body,
    /// which Apache passes to a plain CGI decoded and ends with the end of standard input).
    static func declaredBodyLength(_ params: CGIParameters) -> Int? {
        switch Request.bodyFraming(params) {
        case .length(let length): return length
        case .toItsEnd: return nil
        case .none, .invalidLength: return 0
        }
    }

    /// Reads what is left of a body the handler did not read (one it refused for its size), up to
    /// 1 MiB (to its end when it has no length) and for at most 2 s, before the process exits: a
    /// CGI whose standard input is a socket (mod_cgid) and that exits with data unread there makes
    /// the kernel reset it, and Apache then lost the answer already written (a 413 for a
    /// 5,000-byte body, now and then) and dropped the client's connection without a word.
    static func drainUnreadBody(declared: Int?, consumed: Int) {
        var left = min((declared ?? Int.max) - consumed, 1 << 20)
        guard left > 0 else { return }
        let deadline = MonotonicTime.milliseconds() + 2000
        var sink = [UInt8](repeating: 0, count: 16384)
        while left > 0, readable(0, until: deadline) {
            let n = sink.withUnsafeMutableBytes { read(0, $0.baseAddress, min(left, 16384)) }
            if n <= 0 { break }
            left -= n
        }
    }
}
