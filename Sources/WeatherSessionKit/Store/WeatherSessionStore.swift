import Foundation

/// Durable storage for the two things the app keeps: the installation id and the session.
///
/// Implementations store opaque bytes under a ``WeatherSessionStoreItem``; encoding lives in one
/// place (the extension below), so the Keychain, the file and the in-memory store cannot drift
/// apart. The two items are separate so that dropping a dead session never touches the
/// installation id.
///
/// - ``KeychainWeatherSessionStore``: Apple platforms, the one an app should use.
/// - ``FileWeatherSessionStore``: Linux and tests; mode 0600, atomic replace.
/// - ``InMemoryWeatherSessionStore``: tests and previews.
///
/// Methods are synchronous and may block briefly (Keychain, disk). ``WeatherSessionService``
/// calls them from its actor, one at a time. Implementations must be safe to call from any
/// thread.
public protocol WeatherSessionStore: Sendable {
    /// The stored bytes of `item`, or `nil` when nothing is stored.
    func read(_ item: WeatherSessionStoreItem) throws -> Data?
    /// Replaces `item` with `data`; a reader sees either the old or the new bytes, never a mix.
    func write(_ data: Data, for item: WeatherSessionStoreItem) throws
    /// Removes `item`; removing something that is not there is not an error.
    func delete(_ item: WeatherSessionStoreItem) throws
    /// Stores `data` as `item` only if nothing is stored there; returns what was there instead
    /// (`nil` when `data` was stored). Processes sharing the store (an app and its widget) that
    /// add at the same moment agree on one value. The default reads, then writes: atomic only
    /// within one process; the file and Keychain stores make it atomic across processes.
    func add(_ data: Data, for item: WeatherSessionStoreItem) throws -> Data?
}

/// The named items a ``WeatherSessionStore`` holds.
public enum WeatherSessionStoreItem: String, Sendable, CaseIterable {
    /// The random installation id, a UUID string. Created once; survives session loss.
    case installationID = "installation-id"
    /// The current ``WeatherSession`` as JSON; holds bearer tokens.
    case session = "session"
}

/// A stored item could not be read, written or decoded.
public enum WeatherSessionStoreError: Error, Sendable, Equatable {
    /// The item exists but does not decode (damaged, or written by an incompatible version).
    case unreadable(WeatherSessionStoreItem)
    /// A file-system call failed; `errno` says why.
    case fileSystem(operation: String, path: String, errno: Int32)
    /// A Keychain call failed with this `OSStatus`.
    case keychain(operation: String, status: Int32)
}

extension WeatherSessionStore {
    public func add(_ data: Data, for item: WeatherSessionStoreItem) throws -> Data? {
        if let existing = try read(item) { return existing }
        try write(data, for: item)
        return nil
    }

    /// The stored installation id, or `nil` if none has been created yet.
    public func loadInstallationID() throws -> UUID? {
        guard let data = try read(.installationID) else { return nil }
        return try Self.installationID(from: data)
    }

    /// Stores the installation id (lowercase, the canonical form the server hashes), replacing
    /// any stored one.
    public func saveInstallationID(_ id: UUID) throws {
        try write(Data(id.uuidString.lowercased().utf8), for: .installationID)
    }

    /// Stores `candidate` as the installation id unless one is stored already, and returns the
    /// one that is stored: two processes creating the id at once end up with the same one.
    public func claimInstallationID(_ candidate: UUID) throws -> UUID {
        guard let existing = try add(Data(candidate.uuidString.lowercased().utf8), for: .installationID) else { return candidate }
        return try Self.installationID(from: existing)
    }

    private static func installationID(from data: Data) throws -> UUID {
        guard let text = String(data: data, encoding: .utf8),
            let id = UUID(uuidString: text.trimmingCharacters(in: .whitespacesAndNewlines))
        else { throw WeatherSessionStoreError.unreadable(.installationID) }
        return id
    }

    /// The stored session, or `nil` when there is none.
    public func loadSession() throws -> WeatherSession? {
        guard let data = try read(.session) else { return nil }
        do {
            return try JSONDecoder().decode(WeatherSession.self, from: data)
        } catch {
            throw WeatherSessionStoreError.unreadable(.session)
        }
    }

    /// Stores `session`, replacing the previous one.
    public func saveSession(_ session: WeatherSession) throws {
        // Default date strategy: exact Double seconds, so local deadlines survive a round trip.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        try write(try encoder.encode(session), for: .session)
    }

    /// Forgets the session (not the installation id).
    public func deleteSession() throws {
        try delete(.session)
    }
}
