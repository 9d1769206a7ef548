import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore
import WeatherCrypto
import WeatherStore

/// The database records which hash key its installation hashes were made with (migration 0007),
/// and a worker on another key does not start once sessions are stored (end to end:
/// `FoundationEndToEndTests.aHashKeyOtherThanTheDatabasesStopsTheWorkersUntilAdopted`).
@Suite struct HashKeyRecordTests {
    let first = Array(repeating: UInt8(ascii: "a"), count: 32)
    let second = Array(repeating: UInt8(ascii: "b"), count: 32)

    @Test func theFirstKeyIsRecordedAndAnotherIsRefusedOnceSessionsAreStored() throws {
        let t = try TestGateway()
        #expect(try t.store.recordedHashKey() == nil)
        try Bootstrap.verifyHashKey(first, store: t.store, now: t.clock.now())
        let recorded = try #require(try t.store.recordedHashKey())
        #expect(recorded.fingerprint == Bootstrap.fingerprint(ofHashKey: first) && recorded.recordedAt == t.clock.now())
        #expect(recorded.fingerprint.count == 64 && recorded.fingerprint != Bootstrap.fingerprint(ofHashKey: second))
        #expect(!recorded.fingerprint.contains(String(decoding: first, as: UTF8.self)))

        // No session stored: nothing was hashed with the first key, so another takes its place.
        t.clock.advance(60)
        try Bootstrap.verifyHashKey(second, store: t.store, now: t.clock.now())
        #expect(try t.store.recordedHashKey()?.fingerprint == Bootstrap.fingerprint(ofHashKey: second))

        _ = t.createSession()
        #expect {
            try Bootstrap.verifyHashKey(first, store: t.store, now: t.clock.now())
        } throws: { error in
            "\(error)" == Bootstrap.hashKeyMismatch && "\(error)".contains("weatherctl adopt-hash-key")
        }
        #expect(try t.store.recordedHashKey()?.fingerprint == Bootstrap.fingerprint(ofHashKey: second), "the record is kept")
        try Bootstrap.verifyHashKey(second, store: t.store, now: t.clock.now())  // its own key starts

        // On purpose (`weatherctl adopt-hash-key`): replaced.
        #expect(
            try t.store.recordHashKey(fingerprint: Bootstrap.fingerprint(ofHashKey: first), when: .always, now: t.clock.now())
                == Bootstrap.fingerprint(ofHashKey: first))
        try Bootstrap.verifyHashKey(first, store: t.store, now: t.clock.now())
    }

    /// A store whose record was read but cannot be written (busy, read-only, full) is judged by
    /// what was read: another key with sessions stored stops the worker (a review: the failed
    /// write let it serve on).
    @Test func aMismatchReadStopsTheWorkerEvenWhenTheStoreCannotBeWritten() throws {
        let t = try TestGateway()
        try Bootstrap.verifyHashKey(first, store: t.store, now: t.clock.now())
        _ = t.createSession()
        let readOnly = SQLiteGatewayStore(database: try Database(path: t.config.databasePath, readOnly: true, gatewayFile: false))
        #expect(throws: StartupError.self) { try Bootstrap.verifyHashKey(second, store: readOnly, now: t.clock.now()) }
        #expect(try Bootstrap.verifyHashKey(first, store: readOnly, now: t.clock.now()) == .matches)
    }

    /// Two workers starting at once on a new database with different keys: the first record
    /// stands (the second worker then stops, `verifyHashKey`). A recorded key gives way to
    /// another only while no session is stored, judged in the same transaction, or on purpose.
    @Test func aRecordGivesWayOnlyWhileNoSessionIsStoredOrOnPurpose() throws {
        let t = try TestGateway()
        let a = Bootstrap.fingerprint(ofHashKey: first), b = Bootstrap.fingerprint(ofHashKey: second)
        #expect(try t.store.recordHashKey(fingerprint: a, when: .ifNoneRecorded, now: t.clock.now()) == a)
        #expect(try t.store.recordHashKey(fingerprint: b, when: .ifNoneRecorded, now: t.clock.now()) == a)
        #expect(try t.store.recordHashKey(fingerprint: b, when: .whileNoSessionIsStored, now: t.clock.now()) == b)
        _ = t.createSession()
        #expect(try t.store.recordHashKey(fingerprint: a, when: .whileNoSessionIsStored, now: t.clock.now()) == b)
        #expect(try t.store.recordHashKey(fingerprint: a, when: .always, now: t.clock.now()) == a)
    }
}
