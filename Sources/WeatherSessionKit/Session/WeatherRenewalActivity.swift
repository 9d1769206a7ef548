import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Something a renewal or a revocation runs inside, for as long as it takes: on iOS, background
/// time, so that a refresh sent just before the app is suspended gets its answer. (A suspended
/// app that loses the answer recovers, but with a new session: the gateway takes the spent
/// refresh token, presented again after its retry window, for a replay and revokes the old one.)
///
/// An app passes one to ``WeatherSessionService/init(baseURL:store:transport:clock:platform:appVersion:refreshRetryInterval:activity:)``.
/// For example, with UIKit (not compiled with this package, which is built and tested on Linux):
///
/// ```swift
/// struct BackgroundTime: WeatherRenewalActivity {
///     func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T {
///         let task = await MainActor.run { BackgroundTask(name: "weather-session") }
///         defer { Task { @MainActor in task.end() } }
///         return try await work()
///     }
/// }
///
/// /// One `beginBackgroundTask`, ended once: when the work is done, or when iOS says the time
/// /// is up (a task not ended then gets the app terminated; a renewal with its repeats can
/// /// outlast the time iOS gives).
/// @MainActor final class BackgroundTask {
///     private var id = UIBackgroundTaskIdentifier.invalid
///     init(name: String) {
///         id = UIApplication.shared.beginBackgroundTask(withName: name) { [weak self] in self?.end() }
///     }
///     func end() {
///         guard id != .invalid else { return }
///         UIApplication.shared.endBackgroundTask(id)
///         id = .invalid
///     }
/// }
/// ```
/// In an app extension, `ProcessInfo.performExpiringActivity(withReason:)` plays that part.
public protocol WeatherRenewalActivity: Sendable {
    /// Runs `work` to its end and returns what it returned (or throws what it threw).
    func run<T: Sendable>(_ work: @escaping @Sendable () async throws -> T) async throws -> T
}
