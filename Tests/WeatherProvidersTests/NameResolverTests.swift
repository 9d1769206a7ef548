import CHTTPClient
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Testing

/// `chttp_resolve` with a lookup function the test controls: a name `hold-FD-…` is answered
/// (as 127.0.0.1) only when the pipe whose read end is FD reaches its end, `fail-…` fails.
/// A resolver that never answers used to cost one thread per request for as long as the
/// system resolver tried (about 10 s); now one per name, at most `CHTTP_LOOKUP_SLOTS`.
@Suite struct NameResolverTests {
    /// Blocks on the pipe named in the host, then answers 127.0.0.1.
    static let heldLookup: chttp_lookup_function = { host, port, hints, result in
        let name = String(cString: host!)
        if name.hasPrefix("fail-") { return EAI_NONAME }
        let parts = name.split(separator: "-")
        if parts.count >= 2, parts[0] == "hold", let fd = Int32(parts[1]) {
            var byte: UInt8 = 0
            while read(fd, &byte, 1) > 0 {}
        }
        return getaddrinfo("127.0.0.1", port, hints, result)
    }

    /// A pipe whose write end the test closes to let every held lookup finish.
    final class Gate: @unchecked Sendable {
        let readEnd: Int32
        private var writeEnd: Int32
        init() throws {
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            readEnd = ends[0]
            writeEnd = ends[1]
        }
        func open() {
            if writeEnd >= 0 { close(writeEnd) }
            writeEnd = -1
        }
        deinit {
            open()
            close(readEnd)
        }
    }

    func resolve(_ resolver: UnsafeMutablePointer<chttp_resolver>, _ host: String, timeoutMs: Int32) -> Int32 {
        var addresses: UnsafeMutablePointer<addrinfo>?
        let status = chttp_resolve(resolver, host, "80", timeoutMs, &addresses)
        if let addresses { freeaddrinfo(addresses) }
        return status
    }

    /// Waits (briefly, polling) until no lookup runs: the held threads have finished.
    func waitUntilIdle(_ resolver: UnsafeMutablePointer<chttp_resolver>) {
        for _ in 0..<2_000 where chttp_resolver_running(resolver, 0) > 0 { usleep(1_000) }
    }

    @Test func aLookupThatOutlivesItsCallerIsWaitedForAgainNotStartedAgain() throws {
        let resolver = try #require(chttp_resolver_new(Self.heldLookup))
        let gate = try Gate()
        let name = "hold-\(gate.readEnd)-provider.example"
        #expect(resolve(resolver, name, timeoutMs: 20) == CHTTP_RESOLVE_TIMEOUT)
        #expect(resolve(resolver, name, timeoutMs: 20) == CHTTP_RESOLVE_TIMEOUT)
        #expect(chttp_resolver_started(resolver) == 1)
        #expect(chttp_resolver_running(resolver, 0) == 1)

        // A caller that joins the running lookup gets its answer when it comes.
        nonisolated(unsafe) let shared = resolver
        let opener = Thread {
            for _ in 0..<5_000 where chttp_resolver_running(shared, 1) == 0 { usleep(1_000) }
            gate.open()
        }
        opener.start()
        var addresses: UnsafeMutablePointer<addrinfo>?
        #expect(chttp_resolve(resolver, name, "80", 10_000, &addresses) == CHTTP_RESOLVED)
        #expect(addresses != nil)
        if let addresses { freeaddrinfo(addresses) }
        #expect(chttp_resolver_started(resolver) == 1)
        waitUntilIdle(resolver)
        #expect(chttp_resolver_running(resolver, 0) == 0)

        // Once it has finished, the next call looks the name up again.
        #expect(resolve(resolver, name, timeoutMs: 5_000) == CHTTP_RESOLVED)
        #expect(chttp_resolver_started(resolver) == 2)
    }

    @Test func fullSlotsAnswerBusyAtOnceWithoutAnotherThread() throws {
        let resolver = try #require(chttp_resolver_new(Self.heldLookup))
        let gate = try Gate()
        let slots = Int(CHTTP_LOOKUP_SLOTS)
        for index in 0..<slots {
            #expect(resolve(resolver, "hold-\(gate.readEnd)-name\(index)", timeoutMs: 10) == CHTTP_RESOLVE_TIMEOUT)
        }
        #expect(chttp_resolver_started(resolver) == slots)

        #expect(resolve(resolver, "hold-\(gate.readEnd)-one-more", timeoutMs: 10_000) == CHTTP_RESOLVE_BUSY)
        // A name already being looked up is still waited for (and here times out again).
        #expect(resolve(resolver, "hold-\(gate.readEnd)-name0", timeoutMs: 10) == CHTTP_RESOLVE_TIMEOUT)
        #expect(chttp_resolver_started(resolver) == slots)

        gate.open()
        waitUntilIdle(resolver)
        #expect(chttp_resolver_running(resolver, 0) == 0)
        #expect(resolve(resolver, "hold-\(gate.readEnd)-one-more", timeoutMs: 5_000) == CHTTP_RESOLVED)
    }

    @Test func aFailedLookupIsAFailureWithNoAddresses() throws {
        let resolver = try #require(chttp_resolver_new(Self.heldLookup))
        var addresses: UnsafeMutablePointer<addrinfo>?
        #expect(chttp_resolve(resolver, "fail-nowhere.example", "80", 5_000, &addresses) == CHTTP_RESOLVE_FAILED)
        #expect(addresses == nil)
        // Numeric addresses need no lookup at all.
        #expect(resolve(resolver, "127.0.0.1", timeoutMs: 5_000) == CHTTP_RESOLVED)
        #expect(chttp_resolver_started(resolver) == 1)
    }
}
