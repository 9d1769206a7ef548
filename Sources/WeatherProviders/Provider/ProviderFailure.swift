/// Why one provider call produced no report. Values carry no URL and no body text, so any of
/// them can go into a log line as is.
public enum ProviderFailure: Error, Equatable, Sendable {
    /// No complete answer before the deadline.
    case timeout
    /// The provider (or a gateway in front of it) answered with a non-2xx status.
    case httpStatus(Int, retryAfter: Int?)
    /// A well-formed answer that says it failed (`"status": "failed"`, an error object).
    case providerError
    /// A success status whose body is not JSON at all: HTML or text from a proxy, a captive portal
    /// or a maintenance page, a body cut short, an empty one. No query the gateway builds makes a
    /// provider answer that, so it pauses the provider (`failsEveryQuery`).
    case notJSON
    /// JSON, but not the documented shape: a missing required structure, a field of the wrong
    /// type, an implausible time zone; also an oversized or undecodable body.
    case unparseable
    /// No HTTP answer at all: resolve, connect, a TLS protocol error or a reset connection.
    case transport
    /// The provider's certificate was refused: not signed by an authority this machine trusts
    /// (a missing CA bundle, a proxy that intercepts TLS), expired, or not for this host name.
    /// Apart from `transport` so that an operator can tell a broken trust store from a network.
    case tls
    /// This provider cannot serve the requested dates (decided before or after calling it).
    case notCovered
    /// Skipped without a call: the provider failed recently and is in a pause (`ProviderCooldowns`).
    case coolingDown
    /// The request's time for asking providers ran out (`ProviderChain.fetch`'s `seconds`, spent
    /// by the providers before this one or by an earlier fetch or wait): skipped without a call
    /// when too little was left, or a call given less than the provider's own timeout that did not
    /// answer in it. Says nothing of the provider, so it pauses nobody and counts as no provider
    /// error; the fetch fails as a timeout.
    case outOfTime

    /// True when the failure says the provider cannot serve anyone right now, whatever was asked:
    /// no answer in time, no connection, the key refused (401, 403), the quota spent (429), a
    /// server error (5xx), a success whose body is not JSON (`notJSON`), a redirect (3xx: the gateway follows none, and every query goes to the
    /// same base URL, so a misconfigured one, `http://` answered by a move to `https://`, cost
    /// a round trip on every uncached request). Such a failure pauses the provider (`ProviderCooldowns`). The others
    /// may depend on the query (400 for a date or place, 404, 422, an error or an answer the
    /// parser could not use for this place), and a client must not be able to make the gateway
    /// stop asking a provider for everyone by asking something that fails. A provider whose
    /// errors say more overrides `WeatherProvider.failsEveryQuery`.
    public var failsEveryQuery: Bool {
        switch self {
        case .timeout, .transport, .tls, .notJSON: return true
        case .httpStatus(let status, _): return (300...399).contains(status) || status == 401 || status == 403 || status == 429 || status >= 500
        case .providerError, .unparseable, .notCovered, .coolingDown, .outOfTime: return false
        }
    }

    /// A stable snake_case name for counters and log fields.
    public var code: String {
        switch self {
        case .timeout: return "timeout"
        case .httpStatus: return "http_status"
        case .providerError: return "provider_error"
        case .notJSON: return "not_json"
        case .unparseable: return "unparseable"
        case .transport: return "transport"
        case .tls: return "tls"
        case .notCovered: return "not_covered"
        case .coolingDown: return "cooling_down"
        case .outOfTime: return "out_of_time"
        }
    }

    /// A short human line for logs: safe by construction, it only uses the case and its numbers.
    public var summary: String {
        switch self {
        case .timeout: return "provider timed out"
        case .httpStatus(let status, let retryAfter):
            if let retryAfter { return "provider answered HTTP \(status), retry after \(retryAfter) s" }
            return "provider answered HTTP \(status)"
        case .providerError: return "provider reported an error"
        case .notJSON: return "provider answered with a body that is not JSON"
        case .unparseable: return "provider answer could not be parsed"
        case .transport: return "provider could not be reached"
        case .tls: return "provider's certificate was refused"
        case .notCovered: return "provider does not cover the requested dates"
        case .coolingDown: return "provider skipped for a pause after failing"
        case .outOfTime: return "the request's time for providers ran out: skipped, or its call cut short"
        }
    }
}
