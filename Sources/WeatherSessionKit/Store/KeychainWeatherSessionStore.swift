#if canImport(Security)
import Foundation
import Security

/// A ``WeatherSessionStore`` in the Keychain: the one an iOS app should use.
///
/// Each item is a generic password (`kSecClassGenericPassword`) identified by ``service`` and an
/// account named after the item (`installation-id`, `session`), with accessibility
/// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly`:
/// - *after first unlock*: background refreshes (a widget, a background task) can read it while
///   the phone is locked, once it has been unlocked since boot;
/// - *this device only*: never synced to iCloud Keychain, never restored onto another device
///   from a backup. A restored phone starts with a new installation id and a new session instead
///   of sharing one with the old phone.
///
/// On macOS the items live in the data protection keychain (`kSecUseDataProtectionKeychain`),
/// which needs an app signed with an application identifier or keychain access group; an
/// unsigned command-line tool gets `errSecMissingEntitlement` (-34018) and should use
/// ``FileWeatherSessionStore``.
///
/// Keychain items survive app deletion on iOS, so a reinstall keeps the installation id and
/// session; ``WeatherSessionService/revoke(resettingInstallationID:)`` is the way to end the
/// session and, with `true`, to start over under a new id.
///
/// Items are looked up in `accessGroup` only: an app that adds an access group in a later
/// version (to share with a new widget) no longer finds what the earlier version stored in its
/// default group, and starts with a new installation id and session. Move the two items over
/// before handing the store to the service, or keep the default group.
public struct KeychainWeatherSessionStore: WeatherSessionStore {
    /// `kSecAttrService` of every item, for example the app's bundle id plus `.weather-session`.
    public let service: String
    /// `kSecAttrAccessGroup`, to share the items with an app extension; `nil` for the default.
    public let accessGroup: String?

    /// Creates a store.
    public init(service: String, accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    /// The item's bytes, or `nil` when there is no such item.
    public func read(_ item: WeatherSessionStoreItem) throws -> Data? {
        var query = baseQuery(for: item)
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne

        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        switch status {
        case errSecSuccess:
            guard let data = result as? Data else {
                throw WeatherSessionStoreError.unreadable(item)
            }
            return data
        case errSecItemNotFound:
            return nil
        default:
            throw WeatherSessionStoreError.keychain(operation: "SecItemCopyMatching", status: status)
        }
    }

    /// Replaces the item's bytes (update in place, or add when missing).
    public func write(_ data: Data, for item: WeatherSessionStoreItem) throws {
        let query = baseQuery(for: item)
        let changes: [String: Any] = [
            kSecValueData as String: data,
            kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
        ]

        var status = SecItemUpdate(query as CFDictionary, changes as CFDictionary)
        if status == errSecItemNotFound {
            var attributes = query
            attributes.merge(changes) { _, new in new }
            status = SecItemAdd(attributes as CFDictionary, nil)
            if status == errSecDuplicateItem {
                // Another process (an app extension) added it between our update and add.
                status = SecItemUpdate(query as CFDictionary, changes as CFDictionary)
            }
        }
        guard status == errSecSuccess else {
            throw WeatherSessionStoreError.keychain(operation: "write", status: status)
        }
    }

    /// Adds the item unless it exists; returns the existing item's bytes then. `SecItemAdd`
    /// refuses a duplicate, so of two processes adding at once one wins and both see its value.
    public func add(_ data: Data, for item: WeatherSessionStoreItem) throws -> Data? {
        var attributes = baseQuery(for: item)
        attributes[kSecValueData as String] = data
        attributes[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        let status = SecItemAdd(attributes as CFDictionary, nil)
        switch status {
        case errSecSuccess:
            return nil
        case errSecDuplicateItem:
            if let existing = try read(item) { return existing }
            throw WeatherSessionStoreError.keychain(operation: "SecItemAdd", status: status)
        default:
            throw WeatherSessionStoreError.keychain(operation: "SecItemAdd", status: status)
        }
    }

    /// Deletes the item; a missing item is fine.
    public func delete(_ item: WeatherSessionStoreItem) throws {
        let status = SecItemDelete(baseQuery(for: item) as CFDictionary)
        guard status == errSecSuccess || status == errSecItemNotFound else {
            throw WeatherSessionStoreError.keychain(operation: "SecItemDelete", status: status)
        }
    }

    private func baseQuery(for item: WeatherSessionStoreItem) -> [String: Any] {
        var query: [String: Any] = [
            kSecClass as String: kSecClassGenericPassword,
            kSecAttrService as String: service,
            kSecAttrAccount as String: item.rawValue,
            // macOS: the data protection keychain, as on iOS; only there do the accessibility
            // class and `accessGroup` apply. Ignored on the other platforms.
            kSecUseDataProtectionKeychain as String: true,
        ]
        if let accessGroup {
            query[kSecAttrAccessGroup as String] = accessGroup
        }
        return query
    }
}
#endif
