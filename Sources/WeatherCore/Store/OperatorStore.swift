/// What operators ask of the store (`weatherctl`), in the gateway's words: sessions, revocation by
/// installation, hourly counters, pruning and health. No SQL leaves the implementation.
public protocol OperatorStore: GatewayStore {
    /// Sessions matching `filter`, newest first.
    func sessions(_ filter: SessionFilter) throws(StoreError) -> [SessionSummary]

    /// One session and its token counts at `now`; `nil` when there is no such session.
    func session(id: String, now: Timestamp) throws(StoreError) -> SessionDetail?

    /// Revokes every active session of one installation (its `installation_id_hash`) and every token
    /// of those sessions, a batch of sessions per transaction (oldest first), telling workers after
    /// each, so a running service waits for one batch at a time. Returns the ids revoked, oldest
    /// first. On an error the batches before it stay revoked and a second call revokes the rest.
    func revokeInstallation(hash: String, now: Timestamp) throws(StoreError) -> [String]

    /// False when this process cannot tell running workers about a revocation (they may keep
    /// serving grants they already hold until they restart): say so to the operator.
    var revocationsReachWorkers: Bool { get }

    /// True when the store was opened as a read-only snapshot of a copy (a backup read by a user
    /// who may not write beside it): nothing about serving from it applies.
    var isReadOnlySnapshot: Bool { get }

    /// Counter rows whose hour bucket lies in `fromHour...toHour` (both `2026-11-30T02` style).
    func counters(fromHour: String, toHour: String) throws(StoreError) -> [CounterRow]

    /// Deletes (or, with `dryRun`, counts) what `policy` says has outlived its use. A run that
    /// deletes, and is `complete`, records `now` as the last clean-up's start
    /// (`GatewayStore.pruneIfDue`).
    func prune(now: Timestamp, policy: PrunePolicy, dryRun: Bool) throws(StoreError) -> PruneReport

    /// When the last clean-up (`prune`, a worker's or `weatherctl prune`'s) started; nil when
    /// none has, or the database predates the record of it.
    func lastCleanUp() throws(StoreError) -> Timestamp?

    /// The database's own consistency check: `"ok"` when sound, else its first complaints.
    func integrityCheck() throws(StoreError) -> String

    /// Clears the mark a worker leaves on meeting a damaged database file (every worker then
    /// answers health 503); true when there was one. For a file found sound, or made anew.
    func clearDamageMark() -> Bool

    /// Where the rate buckets are counted, and how full that is at `now`.
    func rateBuckets(now: Timestamp) -> RateBuckets

    /// The journal mode in force (`wal` for the gateway).
    func journalMode() throws(StoreError) -> String

    /// Tells running workers that something was revoked, so that they drop the access grants they
    /// keep (a revocation made where they could not be told reaches them this way).
    func announceRevocations()

    /// Migrations shipped with this build that the database has not recorded, in order.
    func pendingMigrations() throws(StoreError) -> [String]

    /// Migrations the database has recorded that this build does not ship: a newer release
    /// applied them. (Workers still serve such a database, so that a release can be rolled back;
    /// the operator tool says so, and will not migrate it.)
    func unknownMigrations() throws(StoreError) -> [String]

    /// Applies every pending migration; returns the names applied, in order.
    func applyMigrations() throws(StoreError) -> [String]
}

/// Which sessions `sessions(_:)` returns.
public struct SessionFilter: Sendable, Equatable {
    /// `active` or `revoked`; `nil` for both.
    public var status: SessionStatus?
    /// Only sessions of this `installation_id_hash`.
    public var installationIdHash: String?
    /// At most this many, newest first.
    public var limit: Int

    public init(status: SessionStatus? = nil, installationIdHash: String? = nil, limit: Int = 50) {
        self.status = status
        self.installationIdHash = installationIdHash
        self.limit = limit
    }
}

/// `anonymous_weather_sessions.status`.
public enum SessionStatus: String, Sendable, CaseIterable {
    case active
    case revoked
}

/// A session as operators see it: never a token, a token hash or the installation id. The first
/// characters of the installation hash let sessions of one installation be recognised together.
public struct SessionSummary: Sendable, Equatable {
    public var id: String
    public var platform: String
    public var appVersion: String?
    public var status: String
    public var createdAt: Timestamp?
    public var lastSeenAt: Timestamp?
    public var revokedAt: Timestamp?
    /// The first 12 hex characters of `installation_id_hash`.
    public var installationHashPrefix: String

    public init(
        id: String, platform: String, appVersion: String?, status: String, createdAt: Timestamp?,
        lastSeenAt: Timestamp?, revokedAt: Timestamp?, installationHashPrefix: String
    ) {
        self.id = id
        self.platform = platform
        self.appVersion = appVersion
        self.status = status
        self.createdAt = createdAt
        self.lastSeenAt = lastSeenAt
        self.revokedAt = revokedAt
        self.installationHashPrefix = installationHashPrefix
    }

    /// How many characters of the installation hash operators see.
    public static let hashPrefixLength = 12
}

/// One session with its tokens counted by type and state.
public struct SessionDetail: Sendable, Equatable {
    public var summary: SessionSummary
    /// Access and refresh token counts, in that order.
    public var tokens: [TokenCounts]
    /// Sessions (this one included) created by the same installation.
    public var sessionsOfInstallation: Int

    public init(summary: SessionSummary, tokens: [TokenCounts], sessionsOfInstallation: Int) {
        self.summary = summary
        self.tokens = tokens
        self.sessionsOfInstallation = sessionsOfInstallation
    }
}

/// Tokens of one type in one session. A token is counted once: revoked (which includes refresh
/// tokens retired by rotation) before expired, expired before live.
public struct TokenCounts: Sendable, Equatable {
    public var type: TokenKind
    public var live: Int
    public var expired: Int
    public var revoked: Int

    public init(type: TokenKind, live: Int = 0, expired: Int = 0, revoked: Int = 0) {
        self.type = type
        self.live = live
        self.expired = expired
        self.revoked = revoked
    }
}

/// Where the rate buckets (`GatewayStore.take`) are counted, as the process asking sees it
/// (`weatherctl stats` and `check`; a worker says at start when it counts in the database).
public enum RateBuckets: Sendable, Equatable {
    /// In a table every worker of the machine shares (no write per take).
    case sharedTable(RateTableState)
    /// In the database's own rows, a write for each take, and why not in a shared table.
    case database(why: String)
    /// Not known to this process, and why: it could not open the file the table is in (a user
    /// who may only read it, or no worker has made it yet). The workers may still share one.
    case notKnown(why: String)

    /// One line for an operator: `weatherctl stats` and `check`, and a worker's start.
    public var summary: String {
        switch self {
        case .sharedTable(let t):
            "in the table the workers share beside the database (\(t.live) of \(t.slots) slots live now; \(t.forgottenForRoom) bucket\(t.forgottenForRoom == 1 ? "" : "s") forgotten to make room since it was made"
                + (t.lastLockMiss.map {
                    "; \(t.lockMisses) take\(t.lockMisses == 1 ? "" : "s"), read\(t.lockMisses == 1 ? "" : "s") or give-back\(t.lockMisses == 1 ? "" : "s") went without it since it was made, because another process held its lock too long (a stopped one), the last at \($0.iso8601))"
                } ?? ")")
        case .database(let why):
            "in the database, a write for each take of a quota, not in the table the workers share: \(why)"
        case .notKnown(let why):
            "not known here: \(why)"
        }
    }
}

/// The table of `RateBuckets.sharedTable`.
public struct RateTableState: Sendable, Equatable {
    /// Its size, in buckets.
    public var slots: Int
    /// Buckets taken from and not yet full again.
    public var live: Int
    /// Buckets forgotten to make room since the table was made: a count that keeps rising says
    /// more clients take at once than the table holds, each such client gaining at most what it
    /// had spent.
    public var forgottenForRoom: UInt64
    /// Takes, reads and give-backs that went without the table since it was made, because
    /// another process held its lock too long (a stopped one): a take is then counted in the
    /// database, a give-back dropped.
    public var lockMisses: UInt64
    /// When the last of them happened; nil when none has.
    public var lastLockMiss: Timestamp?

    public init(slots: Int, live: Int, forgottenForRoom: UInt64, lockMisses: UInt64, lastLockMiss: Timestamp?) {
        self.slots = slots
        self.live = live
        self.forgottenForRoom = forgottenForRoom
        self.lockMisses = lockMisses
        self.lastLockMiss = lastLockMiss
    }
}

/// One `weather_counters` row: a named count in one UTC hour.
public struct CounterRow: Sendable, Equatable {
    /// `2026-11-30T02`.
    public var hour: String
    public var name: String
    public var value: Int64

    public init(hour: String, name: String, value: Int64) {
        self.hour = hour
        self.name = name
        self.value = value
    }
}

/// What `weatherctl prune` deletes, and why each row is safe to delete.
///
/// Retention policy (all ages measured from the moment `prune` runs):
/// - **Tokens** (`weather_session_tokens`) are deleted once they expired more than
///   `expiredTokenGrace` ago (1 day). Revoked tokens that have not yet expired are kept: a refresh
///   token retired by rotation must still be recognised so that presenting it again is detected as
///   reuse (which revokes the session) rather than answered as an unknown token. A live token (not
///   expired, not revoked, of an active session) is never deleted.
/// - **Revoked sessions** (`anonymous_weather_sessions`) are deleted, together with all their
///   tokens, once they were revoked more than `revokedSessionRetention` ago (30 days), so an
///   operator can still inspect a recent revocation.
/// - **Abandoned sessions** are deleted, together with their tokens, when none of their tokens
///   expires later than `abandonedSessionRetention` ago (30 days) and they were last seen more
///   than that plus `refreshTokenLifetime` ago (the last token expired at most that long after
///   the last sighting; the tokens themselves may be pruned already): such a session can no
///   longer be used or refreshed.
/// - **Weather cache** rows are deleted once their stale deadline (`stale_until`) has passed; they
///   can no longer be served, not even as a stale copy.
/// - **Fetch locks** are deleted once expired; an expired lock is free to take anyway.
/// - **Rate-limit buckets** are deleted when their theoretical arrival time is in the past: such a
///   bucket is full, exactly as if it had no row.
/// - **Grid-cell records** are deleted once older than the distinct-cell window
///   (`WEATHER_LIMIT_DAY_SECONDS`, 86 400 s by default); they no longer count against the quota.
/// - **Counters** are deleted when their hour is more than `counterRetention` old (90 days).
/// - `d1_migrations` is never touched.
///
/// Sessions and tokens are walked in ranges of `batchSize` rows by rowid (no index on their
/// expiry keeps their inserts cheap), each range read without the write lock, so a run reads
/// both tables whole; what a range dooms goes in chunks of `deleteChunk` (256) rows, each its own
/// short `BEGIN IMMEDIATE` transaction with a pause after it, so workers serving requests wait
/// at most one chunk for the write lock. The other tables go `batchSize` rows to a statement
/// (the limits' and the counters' have no index on their expiry, so each statement scans them,
/// and small chunks rescanned them: a review's run took 20.4 s for 200,000 doomed rate-limit rows
/// in chunks of 256 against 1.6 s in statements of 5,000).
public struct PrunePolicy: Sendable, Equatable {
    /// Seconds after expiry before a token row is deleted.
    public var expiredTokenGrace: Int64 = 86_400
    /// Seconds after revocation before a session and its tokens are deleted.
    public var revokedSessionRetention: Int64 = 30 * 86_400
    /// Seconds after its last token expired before an unused session is deleted.
    public var abandonedSessionRetention: Int64 = 30 * 86_400
    /// The refresh-token lifetime (`WEATHER_REFRESH_TOKEN_TTL`): a session's last token expires
    /// at most this long after the session was last seen.
    public var refreshTokenLifetime: Int64 = 2_592_000
    /// The distinct-grid-cell window, seconds (`LimitSettings.dayWindow`).
    public var cellWindow: Int64 = 86_400
    /// Seconds hourly counters are kept.
    public var counterRetention: Int64 = 90 * 86_400
    /// Rows the walks of sessions and tokens read at a time, without the write lock.
    public var batchSize: Int = 5000
    /// Rows deleted per transaction at most (sessions: a quarter as many, each with its tokens),
    /// so a worker waits for the write lock no longer than that takes (a few milliseconds).
    public var deleteChunk: Int = 256
    /// Where set (a worker's clean-up), the walks of sessions and tokens stop after the range
    /// whose deletions bring the time spent deleting past this many milliseconds (reading is not
    /// counted, so every run reads past what it keeps), and the report is not `complete`; the
    /// other tables are still pruned. The next run walks again from the start, quickly past what
    /// this one deleted. Nil: no limit (`weatherctl prune`).
    public var walkTimeLimitMs: Int64?

    public init() {}

    /// The policy under `config`: its refresh-token lifetime and distinct-cell window.
    public init(config: GatewayConfig) {
        refreshTokenLifetime = config.tokenPolicy.refreshTTL
        cellWindow = config.limits.dayWindow
    }
}

/// Rows deleted (or, in a dry run, that would be deleted), per table.
public struct PruneReport: Sendable, Equatable {
    public var dryRun: Bool
    /// False when `PrunePolicy.walkTimeLimitMs` cut the walks short: more is left to delete.
    public var complete = true
    /// For a run cut short by `GatewayStore.pruneIfDue`: whether it recorded the clean-up as due
    /// at the next look. False when that write failed: the rest then waits a whole interval.
    public var dueAgainAtNextLook = true
    /// Table name and row count, in the order the tables are pruned.
    public var tables: [(table: String, rows: Int)]

    public init(dryRun: Bool, tables: [(table: String, rows: Int)] = []) {
        self.dryRun = dryRun
        self.tables = tables
    }

    /// Rows of `table` in this report (0 when absent).
    public func rows(_ table: String) -> Int { tables.first { $0.table == table }?.rows ?? 0 }

    public static func == (a: PruneReport, b: PruneReport) -> Bool {
        a.dryRun == b.dryRun && a.complete == b.complete && a.tables.map(\.table) == b.tables.map(\.table) && a.tables.map(\.rows) == b.tables.map(\.rows)
    }
}
