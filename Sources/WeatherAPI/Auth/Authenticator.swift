import WeatherCore

/// Authentication for every weather route (API.md): a live session token first, then the legacy
/// static token, else 401.
public struct Authenticator {
    let store: any GatewayStore
    let minter: TokenMinter
    let legacyToken: String?

    /// Who is asking: the mode and, for sessions, the grant.
    public struct Identity {
        public var mode: AuthMode
        public var grant: AccessGrant?
    }

    /// Who `request` is: a live session token, else the legacy token where it is accepted;
    /// otherwise 401 with why (`AuthRefusal`); 503 when the store cannot say.
    public func authenticate(_ request: Request, now: Timestamp) throws(HTTPError) -> Identity {
        if let token = request.headers["x-weather-session-token"], TokenSyntax.isWellFormed(token, kind: .access) {
            let grant: AccessGrant?
            do { grant = try store.accessGrant(token: minter.tokenDigest(token)) } catch { throw .storageUnavailable }
            if let grant, grant.isLive(at: now) { return Identity(mode: .weatherSession, grant: grant) }
        }
        // A bad session token falls back to the legacy token during the migration.
        let presented = request.headers["x-weather-token"].flatMap { $0.isEmpty ? nil : $0 }
        if let legacy = legacyToken, let presented, TokenMinter.matches(presented, legacy) {
            return Identity(mode: .weatherToken, grant: nil)
        }
        // A session token names the session first: an app sending both headers whose session
        // ended is no old build, whether or not the legacy path is on (a review).
        let refusal: AuthRefusal =
            request.headers["x-weather-session-token"].map({ !$0.isEmpty }) == true
            ? .sessionToken
            : presented == nil
                ? .noToken
                : legacyToken == nil ? .legacyOff : .legacyToken
        throw .unauthorized(refusal, legacyPathOn: legacyToken != nil)
    }
}
