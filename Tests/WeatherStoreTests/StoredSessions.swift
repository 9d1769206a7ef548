import WeatherCore
@testable import WeatherStore

extension SQLiteGatewayStore {
    /// Stores test session `aws_<n>` with its pair `wst_a<n>`/`wst_r<n>` (hashes `access-<n>`,
    /// `refresh-<n>`), created at `createdAt`, of installation `installation` (`inst-<n>` when nil).
    func createTestSession(_ n: Int, createdAt: Timestamp, installation: String? = nil) throws {
        let pair = IssuedPair(
            accessRowId: "wst_a\(n)", accessHash: "access-\(n)", refreshRowId: "wst_r\(n)", refreshHash: "refresh-\(n)",
            lifetimes: TokenLifetimes(now: createdAt, policy: TokenPolicy()))
        try createSession(
            NewSession(id: "aws_\(n)", installationIdHash: installation ?? "inst-\(n)", platform: "ios", appVersion: nil, createdAt: createdAt),
            tokens: pair)
    }
}
