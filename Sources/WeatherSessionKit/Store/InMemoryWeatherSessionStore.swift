import Foundation

/// A ``WeatherSessionStore`` that keeps everything in memory, for tests and SwiftUI previews.
///
/// Nothing survives the process; share one instance between service instances to simulate an
/// app relaunch.
public final class InMemoryWeatherSessionStore: WeatherSessionStore, @unchecked Sendable {
    // @unchecked: every access to `items` holds `lock`.
    private let lock = NSLock()
    private var items: [WeatherSessionStoreItem: Data] = [:]

    /// Creates an empty store.
    public init() {}

    /// The stored bytes of `item`, or `nil`.
    public func read(_ item: WeatherSessionStoreItem) throws -> Data? {
        lock.withLock { items[item] }
    }

    /// Replaces `item` with `data`.
    public func write(_ data: Data, for item: WeatherSessionStoreItem) throws {
        lock.withLock { items[item] = data }
    }

    /// Removes `item`.
    public func delete(_ item: WeatherSessionStoreItem) throws {
        lock.withLock { items[item] = nil }
    }

    /// Stores `data` unless `item` holds something; returns that something.
    public func add(_ data: Data, for item: WeatherSessionStoreItem) throws -> Data? {
        lock.withLock {
            if let existing = items[item] { return existing }
            items[item] = data
            return nil
        }
    }
}
