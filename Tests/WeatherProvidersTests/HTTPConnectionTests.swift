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
        let connection = try HTTPConnection(to: target, tls: nil, deadline: MonotonicTime.milliseconds() + 5_000)
        let peer = accept(listener, nil, nil)
        try #require(peer >= 0)
        defer { close(peer) }
        let bytes = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)
        #expect(write(peer, bytes, bytes.count) == bytes.count)

        var one = [UInt8](repeating: 0, count: 1)
        let first = try one.withUnsafeMutableBytes { try connection.receive(into: $0, until: MonotonicTime.milliseconds() + 5_000) }
        #expect(first == 1)  // the rest of the bytes are waiting now
        var rest = [UInt8](repeating: 0, count: 64)
        #expect(throws: ProviderFailure.timeout) {
            _ = try rest.withUnsafeMutableBytes { try connection.receive(into: $0, until: MonotonicTime.milliseconds() - 1) }
        }
    }
}

/// Connecting to a provider's addresses in turn.
@Suite struct ConnectFirstTests {
    /// A listener on `host` (IPv4 or IPv6 literal), its port, and its descriptor (the caller closes it).
    static func listener(_ host: String, backlog: Int32 = 16) throws -> (fd: Int32, address: sockaddr_storage, length: socklen_t) {
        var storage = sockaddr_storage()
        var length: socklen_t
        let family: Int32
        if host.contains(":") {
            family = AF_INET6
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                var a = sockaddr_in6()
                a.sin6_family = sa_family_t(AF_INET6)
                _ = inet_pton(AF_INET6, host, &a.sin6_addr)
                raw.storeBytes(of: a, as: sockaddr_in6.self)
            }
        } else {
            family = AF_INET
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutableBytes(of: &storage) { raw in
                var a = sockaddr_in()
                a.sin_family = sa_family_t(AF_INET)
                a.sin_addr.s_addr = inet_addr(host)
                raw.storeBytes(of: a, as: sockaddr_in.self)
            }
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        let bound = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        try #require(bound && listen(fd, backlog) == 0, "cannot listen on \(host)")
        return (fd, storage, length)
    }

    static func address(_ l: (fd: Int32, address: sockaddr_storage, length: socklen_t), _ keep: inout [UnsafeMutablePointer<sockaddr_storage>])
        -> HTTPConnection.Address
    {
        let p = UnsafeMutablePointer<sockaddr_storage>.allocate(capacity: 1)
        p.initialize(to: l.address)
        keep.append(p)
        return HTTPConnection.Address(
            family: Int32(l.address.ss_family), type: Int32(SOCK_STREAM.rawValue), proto: 0,
            address: UnsafeRawPointer(p).assumingMemoryBound(to: sockaddr.self), length: l.length)
    }

    /// A first address whose packets vanish (here: a listener on 127.0.0.2 whose queue is full,
    /// so the kernel drops further connection attempts, as a route to nowhere would) gets a share
    /// of the deadline, and the second address is reached; it used to take the whole deadline
    /// and the call timed out.
    @Test func aFirstAddressThatSwallowsPacketsLeavesTimeForTheNext() throws {
        let hole = try Self.listener("127.0.0.2", backlog: 0)
        defer { close(hole.fd) }
        var keep: [UnsafeMutablePointer<sockaddr_storage>] = []
        defer { keep.forEach { $0.deallocate() } }
        var fillers: [Int32] = []
        defer { fillers.forEach { close($0) } }
        for _ in 0..<4 {  // fill the accept queue; none is accepted
            let f = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            var a = hole.address
            _ = withUnsafePointer(to: &a) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(f, $0, hole.length) } }
            fillers.append(f)
        }
        usleep(100_000)
        let good = try Self.listener("127.0.0.1")
        defer { close(good.fd) }

        let started = MonotonicTime.milliseconds()
        let fd = try HTTPConnection.connectFirst(of: [Self.address(hole, &keep), Self.address(good, &keep)], deadline: started + 3_000)
        close(fd)
        let took = MonotonicTime.milliseconds() - started
        #expect(took >= 1_000 && took < 2_500, "connected after \(took) ms")
        // Alone, the same address takes the whole deadline.
        #expect(throws: ProviderFailure.timeout) {
            _ = try HTTPConnection.connectFirst(of: [Self.address(hole, &keep)], deadline: MonotonicTime.milliseconds() + 500)
        }
    }
}
