import Foundation
import Testing

/// schemathesis (installed from PyPI by scripts/install-deps.sh) runs docs/openapi.json against the live service through nginx and must
/// find no response that contradicts it. `positive_data_acceptance` is left out on purpose: the
/// description cannot say that `platform` comes from a configured allow-list or that trip dates
/// depend on today, so schema-valid inputs can still be 400 (see docs/decisions.md).
@Suite(.serialized) struct SchemathesisTests {
    static let legacy = "legacy-token-0123456789abcdef"

    /// The pinned schemathesis in a private virtualenv under .build, which `scripts/install-deps.sh`
    /// makes (`make test` runs it first): the test itself touches no network.
    static func schemathesis() throws -> String {
        let st = repositoryRoot.appendingPathComponent(".build/schemathesis-venv/bin/st").path
        guard FileManager.default.isExecutableFile(atPath: st) else {
            throw ClientError("schemathesis is not installed: run scripts/install-deps.sh (make test does)")
        }
        return st
    }

    @Test(.timeLimit(.minutes(10))) func liveServiceMatchesItsOpenAPIDescription() throws {
        let st = try Self.schemathesis()
        let fake = try FakeProviders()
        let h = try GatewayHarness(workers: 2, env: fake.environment().merging(["CLOSET_WEATHER_PROXY_TOKEN": Self.legacy]) { $1 })
        h.companions.append(fake)
        let dir = h.directory.appendingPathComponent("st")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try "[auth.openapi.legacyToken]\napi_key = \"\(Self.legacy)\"\n".write(
            to: dir.appendingPathComponent("schemathesis.toml"), atomically: true, encoding: .utf8)
        let run = ChildProcessOutput.runData(
            "/bin/bash",
            ["-c", "cd \(dir.path) && \(st) run http://127.0.0.1:\(h.port)/openapi.json --exclude-checks positive_data_acceptance -w 1 -n 20 2>&1"])
        let out = String(decoding: run.stdout, as: UTF8.self)
        #expect(run.status == 0, "\(out.suffix(3000))")
        #expect(out.contains("passed"))
        #expect(h.isAppRunning)
    }
}
