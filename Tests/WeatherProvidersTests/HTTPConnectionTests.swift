import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import WeatherProviders
import WeatherCore

/// `HTTPConnection` against a socket the test holds the other end of.
@Suite struct HTTPConnectionTests {
    /// The deadline is looked at before every read, not only when a read would have to wait:
    /// bytes already waiting do not carry a call past it. (A provider that never stops sending
    /// kept the socket readable, so the deadline was never looked at.)
    @Test func aReadAfterTheDeadlineTimesOutEvenWithBytesWaiting() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 && getsockname(listener, $0, &length) == 0 }
        }
        try #require(bound && listen(listener, 1) == 0)
        let port = Int(UInt16(bigEndian: address.sin_port))

        let target = try #require(HTTPTarget("http://127.0.0.1:\(port)/"))
        let connection = try HTTPConnection(to: target, tls: nil, deadline: monotonicMilliseconds() + 5_000)
        let peer = accept(listener, nil, nil)
        try #require(peer >= 0)
        defer { close(peer) }
        let bytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
        #expect(write(peer, bytes, bytes.count) == bytes.count)

        var one = [UInt8](repeating: 0, count: 1)
        let first = try one.withUnsafeMutableBytes { try connection.receive(into: $0, until: monotonicMilliseconds() + 5_000) }
        #expect(first == 1)  // the rest of the bytes are waiting now
        var rest = [UInt8](repeating: 0, count: 64)
        #expect(throws: ProviderFailure.timeout) {
            _ = try rest.withUnsafeMutableBytes { try connection.receive(into: $0, until: monotonicMilliseconds() - 1) }
        }
    }
}

/// The failure a paused provider stands for, as the workers' shared page keeps it.
@Suite struct SharedPauseEncodingTests {
    @Test(arguments: [ProviderFailure.timeout, .transport, .tls, .httpStatus(503, retryAfter: nil), .httpStatus(429, retryAfter: nil),
                      .providerError, .unparseable, .notCovered, .coolingDown])
    func everyFailureSurvivesTheSharedPage(failure: ProviderFailure) {
        let entry = ProviderCooldowns.Entry(failures: 2, until: Timestamp(seconds: 1_796_000_000), failure: failure)
        #expect(ProviderCooldowns.Entry(shared: entry.shared) == entry)
    }
}
