/// The one network operation providers need, so they can be tested with a recording fake.
///
/// Implementations must never put the URL into an error or a log line: provider URLs carry keys.
public protocol HTTPTransport: Sendable {
    /// Performs a GET and returns whatever status the server answered with.
    ///
    /// Non-2xx statuses are results, not errors: judging them is the provider's job. Throws
    /// `.timeout` when the deadline passes, `.transport` when no HTTP answer arrived, and
    /// `.unparseable` when the body is larger than the transport accepts.
    func get(_ url: String, timeoutSeconds: Double) throws(ProviderFailure) -> HTTPResult
}
