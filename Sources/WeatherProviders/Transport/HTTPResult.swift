/// What one HTTP GET brought back: enough for a provider to judge the answer, nothing more.
///
/// Headers other than `Retry-After` are dropped on purpose: providers are judged by status and
/// body alone, and keeping fewer bytes keeps the worker small.
public struct HTTPResult: Sendable, Equatable {
    /// The HTTP status code of the final response.
    public var status: Int
    /// `Retry-After` in its delta-seconds form; `nil` when absent or sent as an HTTP date.
    public var retryAfterSeconds: Int?
    /// The raw response body, at most the transport's body cap.
    public var body: [UInt8]
    /// No request went out: this is the answer to the same call moments earlier, given again by
    /// `RepeatedCallTransport`. The providers pass it on (`ProviderCall.repeated`), so that the
    /// counters count no call for it.
    public var isRepeat = false

    /// Creates a result; tests use this to feed fixture bytes to the normalisers.
    public init(status: Int, retryAfterSeconds: Int? = nil, body: [UInt8]) {
        self.status = status
        self.retryAfterSeconds = retryAfterSeconds
        self.body = body
    }
}
