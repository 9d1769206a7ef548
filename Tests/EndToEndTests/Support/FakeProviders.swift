import Foundation

/// `Tests/Support/fake_provider.py` on a loopback port: both providers, switchable failure modes,
/// and a record of every call. Stopped by pid when released.
final class FakeProviders {
    let process: ChildProcess
    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)" }

    init() throws {
        let portFile = FileManager.default.temporaryDirectory.appendingPathComponent("cw-fake-\(UUID().uuidString.prefix(8)).port").path
        process = try ChildProcess(
            "/usr/bin/python3",
            [repositoryRoot.appendingPathComponent("Tests/Support/fake_provider.py").path, "--port", "0", "--port-file", portFile, "--exit-with-parent"],
            environment: ["PATH": "/usr/bin:/bin"])
        var found: Int?
        _ = waitUntil {
            found = (try? String(contentsOfFile: portFile, encoding: .utf8)).flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) };
            return found != nil
        }
        guard let found else { throw ClientError("fake provider did not start") }  // `process` stops it when released
        port = found
        try? FileManager.default.removeItem(atPath: portFile)
    }

    deinit { process.stop(grace: 3) }

    /// Gateway configuration that points both providers here.
    func environment(providers: String = "caiyun,visualcrossing", timeout: String = "1") -> [String: String] {
        [
            "CAIYUN_API_TOKEN": "fake-caiyun-token", "CAIYUN_BASE_URL": baseURL,
            "VISUAL_CROSSING_API_KEY": "fake-vc-key", "VISUAL_CROSSING_BASE_URL": baseURL,
            "WEATHER_PROVIDERS": providers, "WEATHER_PROVIDER_TIMEOUT": timeout,
        ]
    }

    func setMode(_ provider: String, _ mode: String, delay: Double? = nil) throws {
        let d = delay.map { "&delay=\($0)" } ?? ""
        let answer = try HTTPClient.send(port: port, "POST", "/_mode?provider=\(provider)&mode=\(mode)\(d)", body: [])
        guard answer.status == 200 else { throw ClientError("fake provider mode \(mode) not set: \(answer.status) \(answer.text)") }
    }

    func reset() throws {
        let answer = try HTTPClient.send(port: port, "POST", "/_reset", body: [])
        guard answer.status == 200 else { throw ClientError("fake provider not reset: \(answer.status)") }
    }

    /// Every call so far: provider, path and query.
    func calls() throws -> [[String: Any]] {
        let r = try HTTPClient.send(port: port, "GET", "/_calls")
        return (try JSONSerialization.jsonObject(with: Data(r.body)) as? [[String: Any]]) ?? []
    }
}
