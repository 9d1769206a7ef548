import Testing
import WeatherCore
@testable import WeatherProviders

/// The HTTP/1.1 client's pure parts: URLs, response heads, chunked bodies, gzip.
@Suite struct HTTPParsingTests {
    @Test func targetsKeepWhatTheRequestNeeds() throws {
        let plain = try #require(HTTPTarget("http://127.0.0.1:8080/v2.6/k/1,2/weather?x=1"))
        #expect(!plain.tls && plain.host == "127.0.0.1" && plain.port == 8080 && plain.requestTarget == "/v2.6/k/1,2/weather?x=1")
        #expect(plain.hostHeader == "127.0.0.1:8080")
        let secure = try #require(HTTPTarget("https://api.caiyunapp.com?x=1"))
        #expect(secure.port == 443 && secure.requestTarget == "/?x=1" && secure.hostHeader == "api.caiyunapp.com")
        let v6 = try #require(HTTPTarget("http://[::1]:81"))
        #expect(v6.host == "::1" && v6.requestTarget == "/" && v6.hostHeader == "[::1]:81")
        #expect(v6.origin == "http://[::1]:81")
    }

    @Test(arguments: [
        "file:///etc/passwd", "ftp://h/", "http://", "http://user:pw@host/", "http://h:0/", "http://h:65536/",
        "http://h:/", "http://h:8x/", "http://[::1/", "http://h/a b", "http://h/a\r\nX: y", "http://h/#frag",
    ])
    func targetsRefuseWhatIsNotAPlainHTTPURL(url: String) {
        #expect(HTTPTarget(url) == nil)
    }

    /// The configuration reads `CAIYUN_BASE_URL` and `VISUAL_CROSSING_BASE_URL` with the parser the
    /// client reads the URLs it fetches with (`HTTPURL`): a base it accepts builds URLs the client
    /// fetches, from the host and port it names, and a base the client could not fetch stops
    /// start-up (a typo failed every provider call as `transport`, long after the start).
    @Test func aBaseURLTheConfigurationAcceptsIsOneTheClientFetches() throws {
        let candidates = [
            "https://api.caiyunapp.com", "https://weather.visualcrossing.com/", "http://127.0.0.1:19500", "http://localhost:19501/proxy/caiyun//",
            "HTTPS://API.Example.com:8443/p", "http://[::1]:19502", "https://[2001:db8::1]/a;b=c/~x", "https://h_1.example:443/v%2Fx",
            "ftp://h", "https:/h", "//h", "api.caiyunapp.com", "https://", "https://:443", "https:///path", "https://h:0", "https://h:65536",
            "https://h:", "https://h:8x", "https://user@h", "https://u:p@h/", "https://h/a b", "https://h /", "https://h/\t", "https://h?x=1",
            "https://h/?", "https://h/#f", "https://h/%zz", "https://h/%4", "https://ex\u{E4}mple.com", "http://[::1", "http://[::1]x",
            "http://[fe80::1%25eth0]", "https://h\\x", "https://h/\"x", "https://h/{x}", "https://h/a\r\nX: y",
        ]
        var accepted = 0
        for base in candidates {
            let config: GatewayConfig
            do {
                config = try ConfigLoader.load(environment: ["CAIYUN_BASE_URL": base, "VISUAL_CROSSING_BASE_URL": base])
            } catch {
                #expect(error.variable == "CAIYUN_BASE_URL" && error.problem.hasPrefix("must be an http:// or https:// base URL"), "\(error)")
                // Refused, and the client could not fetch from it either (a base with a query
                // is refused on purpose: the path would land in its query).
                let caiyun = CaiyunProvider(baseURL: base, token: "t", transport: RecordingTransport(body: []), timeoutSeconds: 1)
                #expect(HTTPTarget(caiyun.requestURL(for: .forecast(days: 1), at: GridPoint(lat: 1, lon: 2))) == nil || base.contains("?"), "\(base)")
                continue
            }
            accepted += 1
            let parsed = try HTTPURL.parseBase(base)
            #expect(config.caiyunBaseURL == parsed.text && config.visualCrossingBaseURL == parsed.text)
            // The configured base and the text as written (the providers drop trailing slashes
            // themselves) build URLs the client fetches, from the same host and port.
            for written in [config.caiyunBaseURL, base] {
                let caiyun = CaiyunProvider(baseURL: written, token: "t/k?#", transport: RecordingTransport(body: []), timeoutSeconds: 1)
                let vc = VisualCrossingProvider(baseURL: written, apiKey: "k&x= y", transport: RecordingTransport(body: []), timeoutSeconds: 1)
                for url in [
                    caiyun.requestURL(for: .forecast(days: 1), at: GridPoint(lat: -1.5, lon: 2)),
                    vc.requestURL(for: .trip(start: LocalDate("2026-12-20")!, end: LocalDate("2026-12-24")!), at: GridPoint(lat: 1, lon: -2)),
                ] {
                    let target = try #require(HTTPTarget(url), "\(url)")
                    #expect(target.host == parsed.host && target.port == parsed.port && target.tls == parsed.tls, "\(url)")
                    #expect(target.requestTarget.hasPrefix(parsed.path + "/"), "\(url)")
                }
            }
        }
        #expect(accepted == 8)
    }

    func head(_ text: String) -> HTTPResponseHead? {
        HTTPResponseHead(Array(text.utf8)[...])
    }

    @Test func headsFrameTheirBodies() throws {
        let sized = try #require(head("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nRetry-After: 7\r\n\r\n"))
        #expect(sized.status == 200 && sized.retryAfterSeconds == 7 && sized.framing == .length(12) && !sized.gzip && sized.keepAlive)
        let chunked = try #require(head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\nContent-Encoding: gzip\r\n\r\n"))
        #expect(chunked.framing == .chunked && chunked.gzip)
        let closing = try #require(head("HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"))
        #expect(closing.status == 502 && !closing.keepAlive)
        let unframed = try #require(head("HTTP/1.1 200 OK\r\n\r\n"))
        #expect(unframed.framing == .untilClose && !unframed.keepAlive)
        let old = try #require(head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n"))
        #expect(!old.keepAlive)
        #expect(head("HTTP/1.1 204 No Content\r\n\r\n")?.framing == HTTPResponseHead.Framing.none)
        #expect(head("HTTP/1.1 429 Too Many\r\nRetry-After: Wed, 21 Oct 2026 07:28:00 GMT\r\nContent-Length: 0\r\n\r\n")?.retryAfterSeconds == nil)
    }

    @Test(arguments: [
        "HTTP/2 200\r\n\r\n", "ICY 200 OK\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Encoding: br\r\nContent-Length: 1\r\n\r\n",
        "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    ])
    func headsRefuseWhatCannotBeFramedSafely(text: String) {
        #expect(head(text) == nil)
    }

    @Test func headEndIsFoundOnlyOnceComplete() {
        #expect(HTTPResponseHead.end(in: Array("HTTP/1.1 200 OK\r\nA: b\r\n".utf8)[...]) == nil)
        #expect(HTTPResponseHead.end(in: Array("HTTP/1.1 200 OK\r\n\r\nbody".utf8)[...]) == 19)
    }

    func decode(_ pieces: [String], limit: Int = 1024) throws -> (body: String, complete: Bool, consumed: Int) {
        var decoder = ChunkedDecoder(limit: limit)
        var consumed = 0
        for piece in pieces {
            consumed = try Array(piece.utf8).withUnsafeBytes { try decoder.feed($0) }
        }
        return (String(decoding: decoder.body, as: UTF8.self), decoder.isComplete, consumed)
    }

    @Test func chunkedBodiesDecodeAcrossAnySplit() throws {
        let wire = "5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT"
        for split in 0...wire.utf8.count {
            let bytes = Array(wire.utf8)
            let pieces = [String(decoding: bytes[..<split], as: UTF8.self), String(decoding: bytes[split...], as: UTF8.self)]
            let decoded = try decode(pieces)
            #expect(decoded.body == "hello world" && decoded.complete)
        }
        // What follows the body on the connection is left unconsumed.
        #expect(try decode([wire]).consumed == wire.utf8.count - 4)
        #expect(try decode(["A\r\n0123456789\r\n"]).complete == false)
    }

    @Test func chunkedBodiesRefuseBadSizesAndOverruns() {
        #expect(throws: ChunkedDecoder.Failure.malformed) { try decode(["zz\r\n"]) }
        #expect(throws: ChunkedDecoder.Failure.malformed) { try decode(["3\r\nabcX\r\n"]) }
        #expect(throws: ChunkedDecoder.Failure.malformed) { try decode(["123456789\r\n"]) }
        #expect(throws: ChunkedDecoder.Failure.tooLarge) { try decode(["400\r\n"], limit: 1000) }
        #expect(throws: ChunkedDecoder.Failure.malformed) { try decode([String(repeating: "1", count: 5000)]) }
    }

    @Test func gzipRoundTripsAndRefusesBrokenStreams() {
        // `printf 'hello world' | gzip -n | xxd -i`
        let packed: [UInt8] = [
            0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57,
            0x28, 0xcf, 0x2f, 0xca, 0x49, 0x01, 0x00, 0x85, 0x11, 0x4a, 0x0d, 0x0b, 0x00, 0x00, 0x00,
        ]
        #expect(HTTP1Transport.gunzip(packed, limit: 100) == Array("hello world".utf8))
        #expect(HTTP1Transport.gunzip(packed, limit: 5) == nil)
        #expect(HTTP1Transport.gunzip(Array(packed.dropLast(6)), limit: 100) == nil)
        #expect(HTTP1Transport.gunzip(Array("not gzip".utf8), limit: 100) == nil)
    }
}
