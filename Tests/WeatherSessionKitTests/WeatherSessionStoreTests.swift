import Foundation
import Testing
import WeatherSessionKit

/// A fresh directory under the system temporary directory, removed by `cleanUp()`.
struct TemporaryDirectory {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("WeatherSessionKitTests-\(UUID().uuidString)", isDirectory: true)
    }

    func cleanUp() {
        try? FileManager.default.removeItem(at: url)
    }
}

func posixPermissions(_ url: URL) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: url.path)
    return try #require(attributes[.posixPermissions] as? NSNumber).intValue & 0o777
}

@Suite("WeatherSessionStore")
struct WeatherSessionStoreTests {
    @Test func installationIDPersistsAcrossServiceInstancesInFileStoreWithMode0600() async throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.cleanUp() }
        let directory = temporary.url.appendingPathComponent("nested/store", isDirectory: true)
        let clock = FakeClock()
        let gateway = FakeGateway(clock: clock)

        let first = WeatherSessionService(
            baseURL: Harness.baseURL, store: FileWeatherSessionStore(directory: directory),
            transport: gateway, clock: clock)
        let token = try await first.accessToken()
        let id = try await first.installationID()

        let store = FileWeatherSessionStore(directory: directory)
        #expect(try posixPermissions(store.fileURL(for: .installationID)) == 0o600)
        #expect(try posixPermissions(store.fileURL(for: .session)) == 0o600)
        #expect(try posixPermissions(directory) == 0o700)

        let second = WeatherSessionService(
            baseURL: Harness.baseURL, store: store, transport: gateway, clock: clock)
        #expect(try await second.installationID() == id)
        #expect(try await second.accessToken() == token)
        #expect(gateway.count(.createSession) == 1)

        // Even a new session, after the old one is gone, keeps the installation id.
        try store.deleteSession()
        let third = WeatherSessionService(
            baseURL: Harness.baseURL, store: store, transport: gateway, clock: clock)
        _ = try await third.accessToken()
        let creates = gateway.requests(to: .createSession)
        try #require(creates.count == 2)
        #expect(FakeGateway.json(creates[1])["installationId"] == id.uuidString.lowercased())
    }

    @Test func installationIDIsRandomVersion4UUIDDifferentForEachFreshStore() async throws {
        var seen: Set<UUID> = []
        for _ in 0..<20 {
            let service = WeatherSessionService(
                baseURL: Harness.baseURL, store: InMemoryWeatherSessionStore(),
                transport: FakeGateway(clock: FakeClock()), clock: FakeClock())
            let id = try await service.installationID()
            let bytes = withUnsafeBytes(of: id.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version nibble of \(id)")
            #expect(bytes[8] >> 6 == 0b10, "variant bits of \(id)")
            seen.insert(id)
        }
        #expect(seen.count == 20)
    }

    @Test func damagedInstallationIDIsReplacedByNewRandomOne() async throws {
        let store = InMemoryWeatherSessionStore()
        try store.write(Data("not-a-uuid".utf8), for: .installationID)
        let service = WeatherSessionService(
            baseURL: Harness.baseURL, store: store, transport: FakeGateway(clock: FakeClock()), clock: FakeClock())

        let id = try await service.installationID()

        #expect(try store.loadInstallationID() == id)
    }

    @Test func fileStoreReplacesAtomicallyAndLeavesNoTemporaryFiles() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.cleanUp() }
        let store = FileWeatherSessionStore(directory: temporary.url)

        try store.write(Data("one".utf8), for: .session)
        try store.write(Data("two".utf8), for: .session)

        #expect(try store.read(.session) == Data("two".utf8))
        #expect(try posixPermissions(store.fileURL(for: .session)) == 0o600)
        let names = try FileManager.default.contentsOfDirectory(atPath: temporary.url.path)
        #expect(names == ["session"])
    }

    /// An app and its widget creating the installation id at the same moment end up with one:
    /// eight file stores over one folder claim eight different ids at once.
    @Test func concurrentClaimsOfTheInstallationIDAgreeOnOne() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.cleanUp() }
        let candidates = (0..<8).map { _ in UUID() }
        let results = Locked<[Int: UUID]>([:])
        DispatchQueue.concurrentPerform(iterations: 8) { i in
            let store = FileWeatherSessionStore(directory: temporary.url)
            if let id = try? store.claimInstallationID(candidates[i]) { results.withLock { $0[i] = id } }
        }
        let ids = results.withLock { $0 }
        let stored = try #require(try FileWeatherSessionStore(directory: temporary.url).loadInstallationID())
        #expect(ids.count == 8 && Set(ids.values) == [stored] && candidates.contains(stored))
        #expect(try posixPermissions(FileWeatherSessionStore(directory: temporary.url).fileURL(for: .installationID)) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: temporary.url.path) == ["installation-id"])

        let memory = InMemoryWeatherSessionStore()
        #expect(try memory.claimInstallationID(candidates[0]) == candidates[0])
        #expect(try memory.claimInstallationID(candidates[1]) == candidates[0])
    }

    @Test func fileStoreTreatsMissingItemsAsAbsent() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.cleanUp() }
        let store = FileWeatherSessionStore(directory: temporary.url.appendingPathComponent("never-created"))

        #expect(try store.read(.session) == nil)
        #expect(try store.loadInstallationID() == nil)
        try store.delete(.session)
    }

    @Test func sessionDeadlinesSurviveAStoreRoundTripExactly() throws {
        let temporary = try TemporaryDirectory()
        defer { temporary.cleanUp() }
        let store = FileWeatherSessionStore(directory: temporary.url)
        let receivedAt = Date(timeIntervalSince1970: 1_780_000_000.123456)
        let session = WeatherSession(
            anonymousSessionId: "aws_x", accessToken: "wta_x", refreshToken: "wtr_x",
            expiresAt: receivedAt + .hours(12), refreshAfter: receivedAt + .hours(6),
            refreshTokenExpiresAt: receivedAt + .days(30))

        try store.saveSession(session)

        #expect(try store.loadSession() == session)
        #expect(!String(describing: session).contains("wta_x"))
        #expect(!String(describing: session).contains("wtr_x"))
    }
}

/// A value shared by threads, touched only under its lock.
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.withLock { body(&value) }
    }
}
