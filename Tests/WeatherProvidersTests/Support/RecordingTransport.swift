import Foundation
import WeatherProviders

/// An `HTTPTransport` that answers from a script and remembers every URL it was asked for.
final class RecordingTransport: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [Result<HTTPResult, ProviderFailure>]
    private var recorded: [String] = []
    private var recordedTimeouts: [Double] = []

    /// Answers are used in order; the last one repeats.
    init(_ answers: [Result<HTTPResult, ProviderFailure>]) {
        precondition(!answers.isEmpty)
        self.answers = answers
    }

    convenience init(status: Int = 200, body: [UInt8], retryAfter: Int? = nil) {
        self.init([.success(HTTPResult(status: status, retryAfterSeconds: retryAfter, body: body))])
    }

    var urls: [String] { lock.withLock { recorded } }
    /// The `timeoutSeconds` of each call, in order.
    var timeouts: [Double] { lock.withLock { recordedTimeouts } }

    func get(_ url: String, timeoutSeconds: Double) throws(ProviderFailure) -> HTTPResult {
        let answer: Result<HTTPResult, ProviderFailure> = lock.withLock {
            recorded.append(url)
            recordedTimeouts.append(timeoutSeconds)
            return answers.count > 1 ? answers.removeFirst() : answers[0]
        }
        return try answer.get()
    }
}
