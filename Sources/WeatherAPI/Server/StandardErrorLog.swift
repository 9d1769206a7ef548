import WeatherCore
#if canImport(Glibc)
import Glibc
#endif

/// Log lines to standard error, one system call each so lines of concurrent workers do not
/// interleave.
public final class StandardErrorLog: LogSink, Sendable {
    private let fd: Int32

    /// Standard error, or another descriptor (tests).
    public init(fd: Int32 = 2) { self.fd = fd }

    public func write(_ line: String) {
        var text = line
        text.withUTF8 { write(utf8: $0) }
    }

    /// The line and its newline in one `writev`: no copy of the line, and (up to PIPE_BUF) never
    /// interleaved with another worker's line.
    public func write(utf8 bytes: UnsafeBufferPointer<UInt8>) {
        var newline = UInt8(ascii: "\n")
        withUnsafeMutablePointer(to: &newline) { nl in
            var parts = (
                iovec(iov_base: UnsafeMutableRawPointer(mutating: bytes.baseAddress), iov_len: bytes.count),
                iovec(iov_base: UnsafeMutableRawPointer(nl), iov_len: 1)
            )
            withUnsafeMutableBytes(of: &parts) { raw in
                _ = writev(fd, raw.baseAddress!.assumingMemoryBound(to: iovec.self), 2)
            }
        }
    }
}
