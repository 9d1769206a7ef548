import Foundation
import WeatherProviders
#if canImport(Glibc)
import Glibc
#endif

/// `Tests/Support/fake_provider.py` as a subprocess on a loopback port, one per test so that
/// modes set by one test never leak into another running in parallel.
final class FakeProviderServer {
    struct StartFailure: Error, CustomStringConvertible { var description: String }

    let port: Int
    let tls: Bool
    var baseURL: String { "\(tls ? "https" : "http")://127.0.0.1:\(port)" }
    private let process = Process()
    private let folder: URL

    /// `certificate` makes the fake serve https with that PEM certificate and key.
    init(certificate: (cert: String, key: String)? = nil) throws {
        tls = certificate != nil
        caFile = certificate?.cert
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // Support
            .deletingLastPathComponent()  // WeatherProvidersTests
            .deletingLastPathComponent()  // Tests
            .appendingPathComponent("Support/fake_provider.py")
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("fake-provider-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let portFile = folder.appendingPathComponent("port")
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script.path, "--port", "0", "--port-file", portFile.path, "--exit-with-parent"]
        if let certificate { process.arguments! += ["--tls-cert", certificate.cert, "--tls-key", certificate.key] }
        try process.run()

        // Poll for the port file rather than sleeping a fixed time: python starts in ~50 ms.
        let deadline = ContinuousClock.now + .seconds(10)
        var port: Int?
        while port == nil && ContinuousClock.now < deadline && process.isRunning {
            if let text = try? String(contentsOf: portFile, encoding: .utf8) { port = Int(text) }
            if port == nil { usleep(10_000) }
        }
        guard let port else {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            throw StartFailure(description: "fake provider did not start")
        }
        self.port = port
    }

    /// Stops the subprocess by its own pid (never by name) and removes its folder.
    func stop() {
        let pid = process.processIdentifier
        if process.isRunning { kill(pid, SIGTERM) }
        // The fake exits on SIGTERM within its 0.1 s poll; SIGKILL only if something went wrong,
        // so a broken fake can never hang the test run.
        let deadline = ContinuousClock.now + .seconds(3)
        while process.isRunning && ContinuousClock.now < deadline { usleep(10_000) }
        if process.isRunning { kill(pid, SIGKILL) }
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: folder)
    }

    /// The certificate to trust when the fake serves https (`setMode` speaks plain http only).
    let caFile: String?

    /// `POST /_mode`, over a plain socket: the code under test only does GET, and the tests
    /// should not pull in URLSession for one control call.
    func setMode(_ provider: String, _ mode: String, delay: Double? = nil) throws {
        var target = "/_mode?provider=\(provider)&mode=\(mode)"
        if let delay { target += "&delay=\(delay)" }
        let answer = try rawRequest("POST \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        guard answer.hasPrefix("HTTP/1.1 200") else { throw StartFailure(description: "mode not set: \(answer)") }
    }

    /// `GET /_calls`, decoded.
    func calls() throws -> [[String: Any]] {
        let result = try HTTP1Transport(caFile: tls ? caFile : nil).get("\(baseURL)/_calls", timeoutSeconds: 5)
        return try JSONSerialization.jsonObject(with: Data(result.body)) as! [[String: Any]]
    }

    /// `GET /_connections`: how many connections the fake has accepted, including this one.
    func connections() throws -> Int {
        let result = try HTTP1Transport(caFile: caFile).get("\(baseURL)/_connections", timeoutSeconds: 5)
        let object = try JSONSerialization.jsonObject(with: Data(result.body)) as! [String: Any]
        return object["connections"] as! Int
    }

    private func rawRequest(_ text: String) throws -> String {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw StartFailure(description: "socket failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw StartFailure(description: "connect failed") }
        let bytes = Array(text.utf8)
        guard write(fd, bytes, bytes.count) == bytes.count else { throw StartFailure(description: "write failed") }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }
}
