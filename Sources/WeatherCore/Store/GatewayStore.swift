/// Storage in the gateway's own words. Handlers see only this; SQLite (and later PostgreSQL)
/// implement it. Every method is one short transaction or one statement.
public protocol GatewayStore: AnyObject {
    // MARK: Sessions and tokens

    /// Stores a new session and its first token pair atomically, after taking `charge` (as `take`
    /// does) in the same transaction: one turn in the writers' queue for both. When a bucket
    /// refuses, nothing is stored and the refusal is the answer; nil `charge`: nothing taken.
    func createSession(_ session: NewSession, tokens: IssuedPair, charging charge: LimitCharge?) throws(StoreError) -> LimitGrant

    /// Looks up an access token by its SHA-256 (`token_hash` is its hex); `nil` when no such
    /// token row exists.
    func accessGrant(token: TokenDigest) throws(StoreError) -> AccessGrant?

    /// The refresh token `refreshTokenHash` as rotation will judge it, read without taking the
    /// write lock; `nil` when it is not a refresh token of `sessionId` that is valid now
    /// (unknown, another session's, expired, the session revoked). Such a token stays invalid,
    /// so it needs no write and is charged to no quota.
    func presentedRefreshToken(hash refreshTokenHash: String, sessionId: String, now: Timestamp) throws(StoreError) -> PresentedRefreshToken?

    /// Why `presentedRefreshToken` found no valid token, for the log line and the counters (never
    /// for the client, which gets one answer for all): `unknown` (no such refresh token: a
    /// database restored from before it was issued looks so), `other_session`, `expired`,
    /// `revoked` (its session is). Read only after a refusal.
    func refreshRefusal(hash refreshTokenHash: String, sessionId: String, now: Timestamp) -> String

    /// Rotates a presented refresh token to `successor` exactly once across all processes (see
    /// `RotationOutcome`). When it rotates, `charge` (one unit of each bucket, no lease) is taken
    /// in the same transaction where the buckets have room; a bucket emptied since the caller
    /// found room is not charged, and the rotation stands (a request is never refused after the
    /// fact).
    func rotate(_ presented: PresentedRefreshToken, successor: IssuedPair, retryWindow: Int64, now: Timestamp, charging charge: LimitCharge?) throws(StoreError)
        -> RotationOutcome

    /// Revokes the session that `refreshTokenHash` belongs to, if it belongs to `sessionId`.
    /// `.notProven` when the token does not prove ownership of that session; `.alreadyRevoked`
    /// when it does but the session was revoked before (no write, no new revocation for the
    /// workers); `.revoked` when this call revoked it.
    func revokeSession(sessionId: String, presentingRefreshTokenHash: String, now: Timestamp) throws(StoreError) -> SessionRevocation

    /// Revokes a session and every token of it (operators). Returns false when there is no such session.
    func revokeSession(id: String, now: Timestamp) throws(StoreError) -> Bool

    /// Moves `last_seen_at` forward for sessions seen since the last flush (batched).
    func touchSessions(_ seen: [String: Timestamp]) throws(StoreError)

    // MARK: Limits

    /// Takes one unit from every bucket, or none when any refuses (GCRA, `GCRA.take`). Where
    /// `extra[i]` > 0 it takes 1 + `extra[i]` units from bucket i if that bucket has plenty of room
    /// (a lease, spent by the calling worker over the next moment). Buckets are shared by every
    /// worker process, atomically: the SQLite store keeps them in shared memory beside the
    /// database (no SQL at all), other stores in one transaction.
    func take(_ buckets: [LimitBucket], extra: [Int], nowMs: Int64) throws(StoreError) -> LimitGrant

    /// Seconds until `bucket` has a unit free (0: one is free now), read without taking it: for a
    /// request that is charged only once it is known to cost anything (a refresh that rotates).
    func wait(for bucket: LimitBucket, nowMs: Int64) throws(StoreError) -> Int64

    /// Returns leased units a worker did not use (`GCRA.giveBack`); as atomic as `take`.
    func giveBack(_ leftovers: [(bucket: LimitBucket, units: Int)], nowMs: Int64) throws(StoreError)

    /// Admits a request for grid `cell` by `sessionId` under a rolling-window distinct-cell quota.
    func admitCell(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> CellAdmission

    /// Until when `cell` counts for the session (it was admitted within the window), or nil when
    /// it does not count: a read, never a write.
    func cellCountedUntil(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> Int64?

    /// The seconds `admitCell` would answer a refusal of `cell` with now, or nil when it would
    /// admit it: a read, never a write (a request another quota refused is not counted, but its
    /// `Retry-After` is the longer of the two waits).
    func cellRefusalWait(_ cell: String, sessionId: String, quota: Quota, nowMs: Int64) throws(StoreError) -> Int64?

    // MARK: Weather cache

    /// The cached body for `key`, fresh or stale, if any is within its stale deadline.
    func cachedWeather(key: String, now: Timestamp) throws(StoreError) -> CachedWeather?

    /// Stores a ready-to-send body. `firstDayEndsAt`: when the first day of its `daily` ends at
    /// its place (unix seconds), for a forecast whose provider sent an offset; nil otherwise.
    func storeWeather(key: String, body: [UInt8], fetchedAt: Timestamp, freshUntil: Timestamp, staleUntil: Timestamp, firstDayEndsAt: Int64?)
        throws(StoreError)

    /// Claims the right to fetch `key` from a provider until `until`; false when another worker
    /// holds it. A claim that runs out more than `FetchLockState.implausibleSeconds` after `until`
    /// (the longest any worker sets) was made under a clock since stepped back: it counts as
    /// expired. A store on one machine also takes over a claim whose owner (see
    /// `FetchLockOwner`) is a process that has ended (`FetchLockState.abandoned`).
    func acquireFetchLock(key: String, owner: String, now: Timestamp, until: Timestamp) throws(StoreError) -> Bool

    /// Releases a claim taken with `acquireFetchLock`.
    func releaseFetchLock(key: String, owner: String) throws(StoreError)

    /// Another worker's claim on `key`, read without writing (a waiter polls this), judged as
    /// `acquireFetchLock` would judge it with the same `now` and `until`.
    func fetchLockState(key: String, now: Timestamp, until: Timestamp) throws(StoreError) -> FetchLockState

    // MARK: Counters and health

    /// Why the last call that threw failed (a SQLite store: `SQLite error 13: database or disk
    /// is full`; never a value of a request), for the log line of the 503 it became: a full or
    /// read-only disk is otherwise told from nothing. Nil when none has failed.
    var lastFailure: StoreError? { get }

    /// Milliseconds the calls since the last `takeWriteWaitMs` or `afterResponse` waited for the
    /// right to write (behind another worker's or another program's transaction), and the count
    /// starts again: for the log line of a request that waited long. `afterResponse` starts it
    /// again too, so the writes after a response (counters, touches) count for no request.
    func takeWriteWaitMs() -> Int64

    /// Adds batched counter increments, keyed by hour.
    func addCounters(_ counts: [CounterKey: Int64]) throws(StoreError)

    /// True when the file this store opened is no longer at its path: deleted or moved under the
    /// running worker, which goes on writing into it (SQLite: the file's identity, a `stat`).
    var databaseFileIsGone: Bool { get }

    /// Tries again to count the rate buckets in memory every worker shares, where the store's
    /// opening could not (no room on the disk then); true when this call made it so. A store
    /// without such memory answers false.
    func retrySharedRateBuckets() -> Bool

    /// True when the database answers and every migration is applied, and no call found it
    /// damaged (SQLite: a malformed page).
    func isHealthy() -> Bool

    /// Whether any session is stored, revoked or not (start-up: a missing hash key is not
    /// replaced then).
    func holdsAnySession() throws(StoreError) -> Bool

    /// The fingerprint of the hash key this database's installation hashes were made with, as
    /// recorded (`Bootstrap.verifyHashKey`), and when; nil when none is recorded yet.
    func recordedHashKey() throws(StoreError) -> (fingerprint: String, recordedAt: Timestamp)?

    /// Records `fingerprint` as the database's hash key as `when` allows, in one transaction;
    /// returns the fingerprint recorded after the call (another worker's, when it recorded first
    /// or `when` did not allow replacing it).
    func recordHashKey(fingerprint: String, when: HashKeyRecording, now: Timestamp) throws(StoreError) -> String

    /// Housekeeping a store may do once a response is sent, off the request's clock (SQLite:
    /// checkpoint a WAL that has grown).
    func afterResponse()

    /// The clean-up (`OperatorStore.prune` under `policy`) when it is due, else nil: due when
    /// none started in the `interval` seconds before `now`, run by a worker or by `weatherctl
    /// prune` (the prune timer, cron), or when the last one is recorded more than an hour after
    /// `now` (under a clock since set back). Of the workers that find it due at once, one runs
    /// it (the claim is one conditional write); a look that finds it not due is one read. One
    /// that fails, or that `policy.walkTimeLimitMs` cut short, is due again at once.
    func pruneIfDue(now: Timestamp, interval: Int64, policy: PrunePolicy) throws(StoreError) -> PruneReport?

    /// Waits for housekeeping `afterResponse` left running (SQLite: a checkpoint on the
    /// checkpointer's thread), before the process ends.
    func finishHousekeeping()

    /// A clean stop, after `finishHousekeeping`: leaves everything in the database file itself
    /// (SQLite: the WAL copied in and emptied, if no reader holds it), so that a copy of that
    /// file alone, made after the stop, holds every session. The store is not used after.
    func closeForStop()

    // MARK: Provider pauses

    /// Where workers share the pauses of failing providers (`ProviderPauseBoard`); nil when each
    /// worker keeps its own.
    var providerPauses: (any ProviderPauseBoard)? { get }
}

extension GatewayStore {
    /// `createSession(_:tokens:charging:)` charging nothing (tools and tests).
    public func createSession(_ session: NewSession, tokens: IssuedPair) throws(StoreError) {
        _ = try createSession(session, tokens: tokens, charging: nil)
    }

    /// `rotate(…charging:)` charging nothing.
    public func rotate(_ presented: PresentedRefreshToken, successor: IssuedPair, retryWindow: Int64, now: Timestamp) throws(StoreError)
        -> RotationOutcome
    {
        try rotate(presented, successor: successor, retryWindow: retryWindow, now: now, charging: nil)
    }

    public var databaseFileIsGone: Bool { false }
    public func retrySharedRateBuckets() -> Bool { false }
    public func refreshRefusal(hash refreshTokenHash: String, sessionId: String, now: Timestamp) -> String { "unknown" }
    public func takeWriteWaitMs() -> Int64 { 0 }
    public func finishHousekeeping() {}
    public func closeForStop() {}
    public var providerPauses: (any ProviderPauseBoard)? { nil }
}

/// A storage failure: the store's own result code and a message for operators (never SQL, never
/// a secret). Handlers answer every one with 503 `storage_unavailable` and read neither field.
public struct StoreError: Error, CustomStringConvertible {
    public var code: Int32
    public var message: String
    public init(code: Int32, message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "store error \(code): \(message)" }
}

/// A session about to be stored.
public struct NewSession: Sendable {
    public var id: String
    public var installationIdHash: String
    public var platform: String
    public var appVersion: String?
    public var createdAt: Timestamp
    public init(id: String, installationIdHash: String, platform: String, appVersion: String?, createdAt: Timestamp) {
        self.id = id
        self.installationIdHash = installationIdHash
        self.platform = platform
        self.appVersion = appVersion
        self.createdAt = createdAt
    }
}

/// The hashes and rows of one access + refresh pair, never the plaintext.
public struct IssuedPair: Sendable, Equatable {
    public var accessRowId: String
    public var accessHash: String
    public var refreshRowId: String
    public var refreshHash: String
    public var lifetimes: TokenLifetimes
    public init(accessRowId: String, accessHash: String, refreshRowId: String, refreshHash: String, lifetimes: TokenLifetimes) {
        self.accessRowId = accessRowId
        self.accessHash = accessHash
        self.refreshRowId = refreshRowId
        self.refreshHash = refreshHash
        self.lifetimes = lifetimes
    }
}

/// What an access token proves.
public struct AccessGrant: Sendable, Equatable {
    public var sessionId: String
    public var tokenType: TokenKind?
    public var expiresAt: Timestamp
    public var tokenRevoked: Bool
    public var sessionActive: Bool
    public var lastSeenAt: Timestamp
    public init(sessionId: String, tokenType: TokenKind?, expiresAt: Timestamp, tokenRevoked: Bool, sessionActive: Bool, lastSeenAt: Timestamp) {
        self.sessionId = sessionId
        self.tokenType = tokenType
        self.expiresAt = expiresAt
        self.tokenRevoked = tokenRevoked
        self.sessionActive = sessionActive
        self.lastSeenAt = lastSeenAt
    }

    /// Live: an access token, not expired, not revoked, of an active session.
    public func isLive(at now: Timestamp) -> Bool {
        tokenType == .access && !tokenRevoked && sessionActive && now < expiresAt
    }
}

/// A refresh token as `GatewayStore.presentedRefreshToken` found it, for `rotate`.
public struct PresentedRefreshToken: Sendable, Equatable {
    /// Hex SHA-256 of the token, as stored.
    public var hash: String
    public var sessionId: String
    /// The store's own handle on the token's row.
    public var row: Int64
    /// Already rotated (or revoked) when it was read.
    public var spent: Bool

    public init(hash: String, sessionId: String, row: Int64, spent: Bool) {
        self.hash = hash
        self.sessionId = sessionId
        self.row = row
        self.spent = spent
    }
}

extension GatewayStore {
    /// Reads and rotates in one call (tests and tools; the refresh handler reads the quota between
    /// the two, and charges it in the rotation's transaction).
    public func rotate(
        refreshTokenHash: String, sessionId: String, successor: IssuedPair, retryWindow: Int64, now: Timestamp, charging charge: LimitCharge? = nil
    ) throws(StoreError) -> RotationOutcome {
        guard let presented = try presentedRefreshToken(hash: refreshTokenHash, sessionId: sessionId, now: now) else { return .invalid }
        return try rotate(presented, successor: successor, retryWindow: retryWindow, now: now, charging: charge)
    }
}

/// Where another worker's fetch of a cache key stands.
public enum FetchLockState: Sendable, Equatable {
    /// Its claim is live: the fetch is under way.
    case held
    /// It let the claim go: its answer, if it got one, is stored.
    case released
    /// The claim ran out without being let go (the fetcher died or overran its budget), or runs
    /// out implausibly late.
    case expired
    /// The claim is live, but the process that made it has ended (a worker killed mid-fetch):
    /// nothing will let it go before it runs out, so a waiter fetches instead of waiting for
    /// that (`acquireFetchLock` takes such a claim over). Only a store whose workers all run on
    /// one machine can tell; another never says it.
    case abandoned

    /// How far past the longest claim any worker makes a claim may run out and still count.
    public static let implausibleSeconds: Int64 = 60
}

/// Who holds a fetch claim: `pid-<process id>-<random>`. The process id lets a store on one
/// machine see that a claim's worker has ended (`FetchLockState.abandoned`); the random part
/// keeps a reused pid, or two machines sharing a store, from releasing another's claim.
public enum FetchLockOwner {
    public static func make(pid: Int32) -> String {
        "pid-\(pid)-\(String(UInt64.random(in: .min ... .max), radix: 36))"
    }

    /// The process id of an owner `make` wrote; nil for any other text.
    public static func pid(of owner: String) -> Int32? {
        let parts = owner.split(separator: "-", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "pid", let pid = Int32(parts[1]), pid > 0 else { return nil }
        return pid
    }
}

/// What revoking a session by one of its refresh tokens did.
public enum SessionRevocation: Sendable, Equatable {
    case revoked
    case alreadyRevoked
    case notProven
}

/// The result of presenting a refresh token.
public enum RotationOutcome: Sendable, Equatable {
    /// The successor pair was stored now.
    case rotated
    /// The same request again inside the retry window: the successor issued then (its lifetimes).
    case retried(TokenLifetimes)
    /// Unknown, expired, revoked, of another session, or not a refresh token.
    case invalid
    /// A rotated token presented after the window: the whole session is now revoked.
    case reused
}

/// Units to take from buckets at `nowMs`: one of each, and where `extra[i]` > 0 up to that many
/// more of bucket i as a lease (`GatewayStore.take`).
public struct LimitCharge: Sendable, Equatable {
    public var buckets: [LimitBucket]
    public var extra: [Int]
    public var nowMs: Int64
    public init(buckets: [LimitBucket], extra: [Int], nowMs: Int64) {
        self.buckets = buckets
        self.extra = extra
        self.nowMs = nowMs
    }
}

/// One bucket a request draws from.
public struct LimitBucket: Sendable, Equatable {
    /// e.g. `ip:weather:203.0.113.9`; the name before the first `:` is the limit's name.
    public var key: String
    public var quota: Quota
    public init(key: String, quota: Quota) {
        self.key = key
        self.quota = quota
    }
}

/// Allowed, or refused with a truthful wait.
public enum LimitVerdict: Sendable, Equatable {
    case allowed
    case refused(retryAfter: Int64, bucket: String)
}

/// Units taken from each bucket (in the order asked, each ≥ 1), or the refusal.
public enum LimitGrant: Sendable, Equatable {
    case granted([Int])
    case refused(retryAfter: Int64, bucket: String)
}

/// The distinct-cell quota's answer. An admitted cell stays counted for the session until
/// `countedUntilMs`; until then asking for it again changes nothing, so a worker may remember it.
public enum CellAdmission: Sendable, Equatable {
    case admitted(countedUntilMs: Int64)
    case refused(retryAfter: Int64, bucket: String)

    public var verdict: LimitVerdict {
        switch self {
        case .admitted: return .allowed
        case .refused(let r, let b): return .refused(retryAfter: r, bucket: b)
        }
    }
}

extension GatewayStore {
    /// Takes exactly one unit from every bucket, or none when any refuses.
    public func consume(_ buckets: [LimitBucket], nowMs: Int64) throws(StoreError) -> LimitVerdict {
        switch try take(buckets, extra: Array(repeating: 0, count: buckets.count), nowMs: nowMs) {
        case .granted: return .allowed
        case .refused(let r, let b): return .refused(retryAfter: r, bucket: b)
        }
    }
}

/// When `GatewayStore.recordHashKey` writes its fingerprint.
public enum HashKeyRecording: Sendable {
    /// Only where none is recorded: the first start on a database.
    case ifNoneRecorded
    /// Also in place of the one recorded, while no session is stored (nothing was hashed with
    /// the old key): a key made again for a database that had none to lose.
    case whileNoSessionIsStored
    /// In place of any (`weatherctl adopt-hash-key`, on purpose).
    case always
}

/// A cached weather body and how old it is.
public struct CachedWeather: Sendable {
    public var body: [UInt8]
    public var fetchedAt: Timestamp
    public var freshUntil: Timestamp
    /// When the first day of the body's `daily` ends at its place (unix seconds); nil for a trip,
    /// a provider that sent no offset, or a row written before migration 0006.
    public var firstDayEndsAt: Int64?
    public init(body: [UInt8], fetchedAt: Timestamp, freshUntil: Timestamp, firstDayEndsAt: Int64? = nil) {
        self.body = body
        self.fetchedAt = fetchedAt
        self.freshUntil = freshUntil
        self.firstDayEndsAt = firstDayEndsAt
    }
}

/// One counter in one UTC hour (`2026-11-30T02`).
public struct CounterKey: Sendable, Hashable {
    public var hour: String
    public var name: String
    public init(hour: String, name: String) {
        self.hour = hour
        self.name = name
    }

    /// The hour bucket of an instant.
    public static func hour(of t: Timestamp) -> String { String(t.iso8601.prefix(13)) }
}
