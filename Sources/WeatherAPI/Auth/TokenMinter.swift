import WeatherCore
import WeatherCrypto
#if canImport(Glibc)
import Glibc
#endif

/// Makes tokens and hashes with the server's key. The only holder of plaintext tokens, and only
/// for the moment between minting and writing the response.
public struct TokenMinter: Sendable {
    let hashKey: HMACSHA256.Key

    public init(hashKey: [UInt8]) {
        precondition(hashKey.count >= 16, "hash key too short")
        self.hashKey = HMACSHA256.Key(hashKey)
    }

    /// A plaintext pair and what the database may keep of it.
    public struct Pair: Sendable {
        public var accessToken: String
        public var refreshToken: String
        public var stored: IssuedPair
    }

    /// A new session's id and its first pair: each token is its prefix + 256 bits from the OS
    /// CSPRNG, base64url without padding. Every random byte comes from one `getrandom` call
    /// (there were five, a twelfth of creating a session's system calls).
    public func newSession(lifetimes: TokenLifetimes) throws -> (sessionId: String, pair: Pair) {
        let random = try SecureRandom.bytes(9 + 32 + 32 + 16)
        let sessionId = Self.sessionId(random[0..<9])
        let pair = pair(
            access: TokenKind.access.prefix + Base64URL.encode(Array(random[9..<41])),
            refresh: TokenKind.refresh.prefix + Base64URL.encode(Array(random[41..<73])),
            rowIdBits: random[73...], lifetimes: lifetimes)
        return (sessionId, pair)
    }

    /// The successor pair of a refresh token: HMAC(server key, refresh token), so the very same
    /// refresh request presented again gets the very same pair without any plaintext being stored.
    /// Unpredictable without both the presented 256-bit token and the server key.
    public func successorPair(of refreshToken: String, lifetimes: TokenLifetimes) throws -> Pair {
        let access = hashKey.authenticationCode(for: ("successor-access:" + refreshToken).utf8)
        let refresh = hashKey.authenticationCode(for: ("successor-refresh:" + refreshToken).utf8)
        return pair(
            access: TokenKind.access.prefix + Base64URL.encode(access),
            refresh: TokenKind.refresh.prefix + Base64URL.encode(refresh),
            rowIdBits: try SecureRandom.bytes(16)[...], lifetimes: lifetimes)
    }

    /// `rowIdBits`: 16 random bytes, 8 for each row id.
    private func pair(access: String, refresh: String, rowIdBits: ArraySlice<UInt8>, lifetimes: TokenLifetimes) -> Pair {
        precondition(rowIdBits.count == 16, "two row ids need 16 random bytes")
        let start = rowIdBits.startIndex
        return Pair(
            accessToken: access, refreshToken: refresh,
            stored: IssuedPair(
                accessRowId: Self.rowId(rowIdBits[start..<(start + 8)]), accessHash: SHA256.hex(access),
                refreshRowId: Self.rowId(rowIdBits[(start + 8)...]), refreshHash: SHA256.hex(refresh),
                lifetimes: lifetimes))
    }

    /// `aws_` + 22 base64url characters: the time in milliseconds (11 hex digits, good until the
    /// year 2527) and 66 of the 72 random bits given (11 base64url characters).
    ///
    /// Time first, so that new rows land at the right-hand end of the primary-key indexes instead
    /// of on a random page: a random page is one more page each commit writes to the WAL and
    /// each checkpoint copies back, and creation is write-bound (docs/decisions.md). The id was
    /// never a secret (tokens are); the random part keeps ids unique across workers.
    static func sessionId(_ random: ArraySlice<UInt8>) -> String {
        IdentifierPrefix.session + millisecondsHex(digits: 11) + String(Base64URL.encode(Array(random)).prefix(11))
    }

    /// `wst_` + the time in milliseconds (12 hex digits) + 64 random bits (hex), for the same reason.
    static func rowId(_ random: ArraySlice<UInt8>) -> String { IdentifierPrefix.tokenRow + millisecondsHex(digits: 12) + Hex.encode(random) }

    /// Wall-clock milliseconds as `digits` lowercase hex digits: sorts as text in time order.
    static func millisecondsHex(digits: Int) -> String {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let ms = UInt64(max(0, ts.tv_sec)) * 1000 + UInt64(max(0, ts.tv_nsec)) / 1_000_000
        let hex = String(ms & (1 << (4 * UInt64(digits)) - 1), radix: 16)
        return String(repeating: "0", count: digits - hex.utf8.count) + hex
    }

    /// `token_hash`: lowercase hex SHA-256 of the whole token string.
    public func tokenHash(_ token: String) -> String { SHA256.hex(token) }

    /// The same hash as four words, the key access grants are kept under (`TokenDigest`).
    public func tokenDigest(_ token: String) -> TokenDigest { TokenDigest(words: SHA256.words(token)) }

    /// `installation_id_hash`: lowercase hex HMAC-SHA256(hash key, lowercased UUID).
    public func installationHash(_ installationId: String) -> String {
        hashKey.hex(installationId.lowercased())
    }

    /// Constant-time comparison for the legacy token.
    public static func matches(_ presented: String, _ expected: String) -> Bool { ConstantTime.equals(presented, expected) }
}
