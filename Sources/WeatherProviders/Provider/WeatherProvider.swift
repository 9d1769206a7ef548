import WeatherCore

/// One weather source, normalised to the gateway's `WeatherReport`.
///
/// The report's `location` is always the snapped `point` passed in (never the provider's echo of
/// it), `fetchedAt` is `now.iso8601`, and `provider` is `name`.
public protocol WeatherProvider: Sendable {
    /// The provider's name on the wire and in counters: `caiyun`, `visualcrossing`.
    var name: String { get }

    /// Whether this provider can serve `query` at all, decided without a network call.
    ///
    /// `ProviderChain` asks this first so a provider that cannot cover a trip's dates is skipped
    /// without spending a request (or a quota unit) and without counting as a provider call.
    func canCover(_ query: WeatherQuery, now: Timestamp) -> Bool

    /// Calls the provider and normalises its answer.
    func fetch(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) throws(ProviderFailure) -> WeatherReport

    /// `fetch`, saying whether its answer was the one to the same call moments earlier rather than
    /// a request of its own (`ProviderChain` counts calls by it). Default: `fetch`, always a call.
    func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) -> ProviderCall

    /// `call` given at most `seconds`, when that is less than the provider's own timeout: what is
    /// left of the fetch's deadline (`ProviderChain.fetch`). Default: `call`, for providers
    /// without a timeout of their own (test stubs).
    func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> ProviderCall

    /// Whether `failure`, from this provider, means it can serve no query right now (so the chain
    /// pauses it) rather than something about this query alone. Default: `failure.failsEveryQuery`.
    func failsEveryQuery(_ failure: ProviderFailure) -> Bool
}

extension WeatherProvider {
    /// `failure.failsEveryQuery`: what a provider whose errors say nothing more uses.
    public func failsEveryQuery(_ failure: ProviderFailure) -> Bool { failure.failsEveryQuery }

    /// `fetch`, always counted as a call.
    public func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp) -> ProviderCall {
        ProviderCall(result: Result { () throws(ProviderFailure) in try fetch(query, at: point, now: now) })
    }

    /// `call`: a provider without a timeout of its own has nothing to shorten.
    public func call(_ query: WeatherQuery, at point: GridPoint, now: Timestamp, within seconds: Double) -> ProviderCall {
        call(query, at: point, now: now)
    }

    /// Providers without a known horizon cover everything until their answer says otherwise.
    public func canCover(_ query: WeatherQuery, now: Timestamp) -> Bool { true }
}
