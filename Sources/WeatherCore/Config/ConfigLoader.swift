/// Turns the environment and an optional `KEY=VALUE` file into a `GatewayConfig`.
///
/// The process environment wins over the file, so an operator can override one value for one run.
/// Unknown `WEATHER_*` names are refused: a typo must not silently fall back to a default.
public enum ConfigLoader {
    /// Every variable the gateway reads.
    public static let knownVariables: Set<String> = [
        "WEATHER_CONFIG", "WEATHER_DB_PATH", "WEATHER_HASH_KEY", "CLOSET_WEATHER_PROXY_TOKEN",
        "CAIYUN_API_TOKEN", "CAIYUN_BASE_URL", "VISUAL_CROSSING_API_KEY", "VISUAL_CROSSING_BASE_URL",
        "WEATHER_PROVIDERS", "WEATHER_PROVIDER_TIMEOUT", "WEATHER_PROVIDER_COOLDOWN", "WEATHER_ACCESS_TOKEN_TTL", "WEATHER_REFRESH_AFTER",
        "WEATHER_REFRESH_TOKEN_TTL", "WEATHER_REFRESH_RETRY_WINDOW", "WEATHER_CACHE_TTL",
        "WEATHER_CACHE_STALE_TTL", "WEATHER_GRID_DEGREES", "WEATHER_SESSION_CREATE_PER_IP_PER_HOUR",
        "WEATHER_REFRESH_PER_SESSION_PER_HOUR", "WEATHER_REQUESTS_PER_SESSION_PER_HOUR",
        "WEATHER_REQUESTS_PER_IP_PER_HOUR", "WEATHER_GRID_CELLS_PER_SESSION_PER_DAY",
        "WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR", "WEATHER_TRUSTED_PROXIES", "WEATHER_MOUNT_PREFIX",
        "WEATHER_PLATFORMS", "WEATHER_MAX_REQUESTS", "WEATHER_LIMIT_HOUR_SECONDS",
        "WEATHER_LIMIT_DAY_SECONDS", "WEATHER_FLUSH_INTERVAL", "WEATHER_BODY_TIMEOUT",
        "WEATHER_PRUNE_INTERVAL",
    ]

    /// Parses a `KEY=VALUE` file: `#` comments, blank lines, optional `export `, optional quotes.
    /// Everything after `=` is the value, as in a systemd `EnvironmentFile`: a `#` later in the
    /// line is part of it (`readSettingsFile` names such lines). A setting given on more than
    /// one line takes the last line's value, as systemd reads such a file (`readSettingsFile`
    /// names those settings too).
    /// Lines end in LF or CRLF (a file saved on Windows, uploaded to a shared host): to Swift
    /// "\r\n" is one `Character`, which splitting on "\n" never splits, so such a file was one
    /// line and its first value took in every line after it.
    public static func parseFile(_ text: String) throws(ConfigError) -> [String: String] {
        try readSettingsFile(text).values
    }

    /// What a settings file says, and what it holds that is said rather than refused.
    public struct SettingsFile: Sendable, Equatable {
        public var values: [String: String] = [:]
        /// The settings whose unquoted value (on the line that counts, the last) starts with `#`
        /// or holds a space or tab followed by `#` (names only, sorted): what looks like a comment
        /// after the value is part of it (a legacy token no old app sends, a provider key the
        /// provider refuses; `KEY= # retired` turned the legacy path on with the note as its
        /// token, which `Bootstrap` refuses). Otherwise said, not refused (black-box audits, and
        /// an upgrade audit: refusing it sent an operator who moved the note to its own line to a
        /// new, empty database, the old one being named with the note).
        public var commented: [String] = []
        /// Known settings given on more than one line, with their lines, in the order of their
        /// first line. The last line's value is used, as before and as systemd
        /// does; a reader who stops at the first (the example's `CAIYUN_API_TOKEN=`, with the key
        /// appended below, or a key pasted above the example's empty line) is misled, so it is
        /// said. Not refused: files that worked, such as the shared-hosting settings appended
        /// below the example's own lines, would stop the workers at an upgrade.
        public var repeated: [RepeatedSetting] = []
    }

    /// A setting a settings file gives on more than one line.
    public struct RepeatedSetting: Sendable, Equatable, CustomStringConvertible {
        public var name: String
        /// 1-based, in file order; the last is the line whose value is used.
        public var lines: [Int]

        /// `NAME (lines 3 and 40)`: the name and line numbers, never a value.
        public var description: String {
            "\(name) (lines \(lines.dropLast().map(String.init).joined(separator: ", ")) and \(lines.last ?? 0))"
        }
    }

    /// `parseFile`'s values, with the settings it says rather than refuses (`SettingsFile`).
    public static func readSettingsFile(_ text: String) throws(ConfigError) -> SettingsFile {
        var out: [String: String] = [:]
        var linesOf: [String: [Int]] = [:]
        var order: [String] = []
        var commented: Set<String> = []
        for (n, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }).enumerated() {
            var line = raw.trimmingSpaces()
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = String(line.dropFirst(7)).trimmingSpaces() }
            guard let eq = line.firstIndex(of: "=") else {
                throw ConfigError(variable: "line \(n + 1)", problem: "is not KEY=VALUE")
            }
            let key = String(line[..<eq]).trimmingSpaces()
            // Only a name-shaped key is ever repeated in an error: a line such as
            // `CAIYUN_API_TOKEN: secret=` must not put the secret in the log.
            guard isSettingName(key) else {
                throw ConfigError(variable: "line \(n + 1)", problem: "has no setting name before `=` (letters, digits and _)")
            }
            if linesOf[key] == nil { order.append(key) }
            linesOf[key, default: []].append(n + 1)
            commented.remove(key)  // only the line whose value is used, the last, counts
            var value = String(line[line.index(after: eq)...]).trimmingSpaces()
            if value.count >= 2, let f = value.first, f == "\"" || f == "'", value.last == f {
                value = String(value.dropFirst().dropLast())
            } else if value.hasPrefix("#") || value.contains(" #") || value.contains("\t#") {
                commented.insert(key)
            }
            out[key] = value
        }
        // Only known names: an unknown one is refused by the loader, without being repeated.
        let repeated = order.compactMap { key -> RepeatedSetting? in
            guard let lines = linesOf[key], lines.count > 1, knownVariables.contains(key) else { return nil }
            return RepeatedSetting(name: key, lines: lines)
        }
        return SettingsFile(values: out, commented: commented.sorted(), repeated: repeated)
    }

    static let settingPrefixes = ["WEATHER_", "CAIYUN_", "VISUAL_CROSSING_", "CLOSET_WEATHER_"]

    static func isSettingName(_ key: String) -> Bool {
        !key.isEmpty && key.utf8.count <= 64
            && key.utf8.allSatisfy { $0 == UInt8(ascii: "_") || (48...57).contains($0) || (65...90).contains($0) || (97...122).contains($0) }
    }

    /// A value that was refused, for the error message: repeated only when it is short and looks
    /// like a mistyped number (`4s`, `1e3`, `-1`), never when it could be a secret pasted into the
    /// wrong variable.
    static func shown(_ text: String) -> String {
        let numberish = text.utf8.count <= 12 && text.utf8.allSatisfy { "0123456789.,+-_ eEsmhdSMHD".utf8.contains($0) }
        return numberish ? "got \"\(text)\"" : "got a value of \(text.count) characters (not shown)"
    }

    /// A refused list item (a provider name, a CIDR), quoted only when it is short and made of
    /// the characters such an item has; anything else could be a secret in the wrong setting.
    static func shownItem(_ text: String, max: Int, allowed: String) -> String {
        text.utf8.count <= max && text.utf8.allSatisfy { allowed.utf8.contains($0) }
            ? "\"\(text)\"" : "of \(text.count) characters (not shown)"
    }

    /// The refusal of a name no setting has. A typo of a setting is named; anything else might be
    /// a secret on a line of its own, and so might a "name" that is a setting with its value run
    /// on (the `=` forgotten: `WEATHER_HASH_KEYq3Zk…=` printed the key, from a file or from an
    /// `EnvironmentFile`; a security re-audit): only a name of capitals, digits and `_` no
    /// longer than the longest setting is repeated.
    static func unknownSetting(_ key: String, in source: String) -> ConfigError {
        guard settingPrefixes.contains(where: key.hasPrefix), key.utf8.count <= longestSettingName,
            key.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) })
        else {
            return ConfigError(
                variable: "a name in \(source)",
                problem: "is not a known setting (\(key.count) characters, not shown; settings begin with \(settingPrefixes.joined(separator: ", ")))")
        }
        return ConfigError(variable: key, problem: "is not a known setting")
    }

    static let longestSettingName = knownVariables.map(\.utf8.count).max() ?? 0

    /// Builds the configuration: `environment` first, then `file`. `commented`: the settings of
    /// `file` whose value holds what looks like a trailing comment (`SettingsFile.commented`);
    /// when one of them is refused, the message says that a comment goes on a line of its own
    /// (`WEATHER_CACHE_TTL=600 # ten minutes` is not a number).
    public static func load(environment: [String: String], file: [String: String] = [:], commented: [String] = []) throws(ConfigError) -> GatewayConfig {
        do {
            return try loadValues(environment: environment, file: file)
        } catch {
            guard commented.contains(error.variable), environment[error.variable] == nil else { throw error }
            throw ConfigError(variable: error.variable, problem: error.problem + commentHint)
        }
    }

    /// What a refusal of a `commented` setting adds.
    static let commentHint =
        " (the settings file has no comments after a value: everything after = is the value, a \"#\" in it included; put a comment on a line of its own)"

    static func loadValues(environment: [String: String], file: [String: String]) throws(ConfigError) -> GatewayConfig {
        for key in file.keys where !knownVariables.contains(key) {
            throw unknownSetting(key, in: "the configuration file")
        }
        // It names the file; inside that file it would be silently passed over (a contract audit).
        if let named = file["WEATHER_CONFIG"], !named.isEmpty {  // empty: "the default", as everywhere
            throw ConfigError(variable: "WEATHER_CONFIG", problem: "is read from the environment only, not from the settings file")
        }
        for key in environment.keys where key.hasPrefix("WEATHER_") && !knownVariables.contains(key) {
            throw unknownSetting(key, in: "the environment")
        }
        func value(_ key: String) -> String? {
            if let v = environment[key] ?? file[key], !v.isEmpty { return v }
            return nil
        }
        func int(_ key: String, _ range: ClosedRange<Int64>) throws(ConfigError) -> Int64? {
            guard let text = value(key) else { return nil }
            guard let n = Int64(text), range.contains(n) else {
                throw ConfigError(variable: key, problem: "must be a whole number in \(range.lowerBound)...\(range.upperBound), \(shown(text))")
            }
            return n
        }
        func double(_ key: String, _ range: ClosedRange<Double>) throws(ConfigError) -> Double? {
            guard let text = value(key) else { return nil }
            guard let n = Double(text), n.isFinite, range.contains(n) else {
                throw ConfigError(variable: key, problem: "must be a number in \(range.lowerBound)...\(range.upperBound), \(shown(text))")
            }
            return n
        }
        // The client reads the URLs it fetches with the same `HTTPURL`: what is accepted here
        // is fetched, where a typo used to fail every provider call as `transport`. The value is
        // not repeated: a key pasted into a base URL would be.
        func url(_ key: String) throws(ConfigError) -> String? {
            guard let text = value(key) else { return nil }
            do {
                return try HTTPURL.parseBase(text).text
            } catch {
                throw ConfigError(variable: key, problem: "must be an http:// or https:// base URL (scheme://host[:port][/path]); this one \(error)")
            }
        }
        func list(_ key: String) -> [String]? {
            value(key).map { $0.split(separator: ",").map { String($0).trimmingSpaces() }.filter { !$0.isEmpty } }
        }

        var c = GatewayConfig(databasePath: value("WEATHER_DB_PATH") ?? GatewayConfig.defaultDatabasePath)
        guard c.databasePath.hasPrefix("/") || c.databasePath.hasPrefix(".") || !c.databasePath.contains("://") else {
            throw ConfigError(variable: "WEATHER_DB_PATH", problem: "must be a file path")
        }
        if let key = value("WEATHER_HASH_KEY") {
            guard key.utf8.count >= 32 else {
                throw ConfigError(variable: "WEATHER_HASH_KEY", problem: "must be at least 32 characters")
            }
            c.hashKey = key
        }
        // Any length: shipped app builds carry the value, so the operator cannot choose it (until
        // session 35 one under 16 characters stopped every worker from starting, and with it the
        // migration). A short one is warned about instead (`legacyTokenIsShort`).
        c.legacyToken = value("CLOSET_WEATHER_PROXY_TOKEN")
        c.caiyunToken = value("CAIYUN_API_TOKEN")
        c.visualCrossingKey = value("VISUAL_CROSSING_API_KEY")
        if let u = try url("CAIYUN_BASE_URL") { c.caiyunBaseURL = u }
        if let u = try url("VISUAL_CROSSING_BASE_URL") { c.visualCrossingBaseURL = u }
        if let p = list("WEATHER_PROVIDERS") {
            // Commas and spaces alone left no provider: every weather request was 503 with the
            // keys set. Empty is the default order, as for every setting.
            guard !p.isEmpty else {
                throw ConfigError(
                    variable: "WEATHER_PROVIDERS",
                    problem: "names no provider (caiyun, visualcrossing); leave it empty for the default order, and unset a provider's key to leave it out")
            }
            for name in p where !GatewayConfig.knownProviders.contains(name) {
                let shown = shownItem(name, max: 20, allowed: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_")
                throw ConfigError(variable: "WEATHER_PROVIDERS", problem: "names an unknown provider \(shown) (caiyun, visualcrossing)")
            }
            // A name given twice would call a failing provider twice a request, on its quota.
            for (i, name) in p.enumerated() where p[..<i].contains(name) {
                throw ConfigError(variable: "WEATHER_PROVIDERS", problem: "names \(name) twice")
            }
            c.providers = p
        }
        if let t = try double("WEATHER_PROVIDER_TIMEOUT", 0.1...60) { c.providerTimeout = t }
        if let v = try int("WEATHER_PROVIDER_COOLDOWN", 0...3600) { c.providerCooldown = v }
        if let v = try int("WEATHER_ACCESS_TOKEN_TTL", 1...31_536_000) { c.tokenPolicy.accessTTL = v }
        if let v = try int("WEATHER_REFRESH_AFTER", 0...31_536_000) { c.tokenPolicy.refreshAfter = v }
        if let v = try int("WEATHER_REFRESH_TOKEN_TTL", 1...315_360_000) { c.tokenPolicy.refreshTTL = v }
        if let v = try int("WEATHER_REFRESH_RETRY_WINDOW", 0...3600) { c.tokenPolicy.refreshRetryWindow = v }
        guard c.tokenPolicy.refreshAfter <= c.tokenPolicy.accessTTL else {
            throw ConfigError(variable: "WEATHER_REFRESH_AFTER", problem: "must not exceed WEATHER_ACCESS_TOKEN_TTL")
        }
        // A refresh token that dies first cannot renew the access token: clients were told to
        // refresh hours after their refresh token had expired (a black-box clock test).
        guard c.tokenPolicy.refreshTTL > c.tokenPolicy.accessTTL else {
            throw ConfigError(variable: "WEATHER_REFRESH_TOKEN_TTL", problem: "must exceed WEATHER_ACCESS_TOKEN_TTL")
        }
        if let v = try int("WEATHER_CACHE_TTL", 1...86_400) { c.cacheTTL = v }
        if let v = try int("WEATHER_CACHE_STALE_TTL", 0...2_592_000) { c.cacheStaleTTL = v }
        if let v = try double("WEATHER_GRID_DEGREES", 0.001...5) { c.gridDegrees = v }
        let maxLimit: ClosedRange<Int64> = 0...10_000_000
        if let v = try int("WEATHER_SESSION_CREATE_PER_IP_PER_HOUR", maxLimit) { c.limits.sessionCreatePerIPPerHour = Int(v) }
        if let v = try int("WEATHER_REFRESH_PER_SESSION_PER_HOUR", maxLimit) { c.limits.refreshPerSessionPerHour = Int(v) }
        if let v = try int("WEATHER_REQUESTS_PER_SESSION_PER_HOUR", maxLimit) { c.limits.requestsPerSessionPerHour = Int(v) }
        if let v = try int("WEATHER_REQUESTS_PER_IP_PER_HOUR", maxLimit) { c.limits.requestsPerIPPerHour = Int(v) }
        if let v = try int("WEATHER_GRID_CELLS_PER_SESSION_PER_DAY", maxLimit) { c.limits.gridCellsPerSessionPerDay = Int(v) }
        if let v = try int("WEATHER_LEGACY_REQUESTS_PER_IP_PER_HOUR", maxLimit) { c.limits.legacyRequestsPerIPPerHour = Int(v) }
        if let v = try int("WEATHER_LIMIT_HOUR_SECONDS", 1...3600) { c.limits.hourWindow = v }
        if let v = try int("WEATHER_LIMIT_DAY_SECONDS", 1...86_400) { c.limits.dayWindow = v }
        if let proxies = list("WEATHER_TRUSTED_PROXIES") {
            c.trustedProxies = try proxies.map { (text: String) throws(ConfigError) -> CIDR in
                guard let cidr = CIDR(text) else {
                    // Hex alone could be a key: an address has a `.` or a `:`.
                    let address = text.contains(".") || text.contains(":")
                    let shown = shownItem(text, max: address ? 43 : 0, allowed: "0123456789abcdefABCDEF.:/")
                    throw ConfigError(variable: "WEATHER_TRUSTED_PROXIES", problem: "has an invalid CIDR \(shown)")
                }
                return cidr
            }
        }
        if let prefix = value("WEATHER_MOUNT_PREFIX") { c.mountPrefix = try mountPrefix(prefix) }
        if let p = list("WEATHER_PLATFORMS") {
            guard !p.isEmpty else { throw ConfigError(variable: "WEATHER_PLATFORMS", problem: "must name at least one platform") }
            c.platforms = p
        }
        if let v = try int("WEATHER_MAX_REQUESTS", 0...1_000_000_000) { c.maxRequestsPerWorker = Int(v) }
        if let v = try int("WEATHER_FLUSH_INTERVAL", 0...3600) { c.flushInterval = v }
        if let v = try int("WEATHER_BODY_TIMEOUT", 1...300) { c.bodyTimeout = Int(v) }
        if let v = try int("WEATHER_PRUNE_INTERVAL", 0...31_622_400) {
            guard v == 0 || v >= 3600 else { throw ConfigError(variable: "WEATHER_PRUNE_INTERVAL", problem: "must be 0 (off) or at least 3600 seconds") }
            c.pruneInterval = v
        }
        return c
    }

    /// `WEATHER_MOUNT_PREFIX` as the router compares it with the request's decoded path, without
    /// trailing slashes; `/` alone is the root (empty). Spaces and non-ASCII characters are
    /// written as they are (a request's `%20` or `%C3%A4` decodes to them, and the prefix
    /// matched them before session 26, which must go on). Refused, naming what is wrong but not
    /// the value: a `%` (an escape written into the prefix, which the decoded path never holds
    /// as such), `?`, `#` and control characters (no path a client sends has them there), and
    /// an empty, `.` or `..` segment (clients and web servers remove those first).
    static func mountPrefix(_ text: String) throws(ConfigError) -> String {
        func refused(_ problem: String) -> ConfigError { ConfigError(variable: "WEATHER_MOUNT_PREFIX", problem: problem) }
        guard text.hasPrefix("/") else { throw refused("must start with / (e.g. /api)") }
        guard !text.utf8.contains(UInt8(ascii: "%")) else {
            throw refused("holds %: write the prefix unencoded (it is compared with the request's decoded path)")
        }
        guard !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) else {
            throw refused("holds ?, # or a control character: it is the path before /v1, without a query or fragment")
        }
        var prefix = Substring(text)
        while prefix.hasSuffix("/") { prefix.removeLast() }
        let segments = prefix.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        guard !segments.contains(where: \.isEmpty) else { throw refused("has an empty segment (//)") }
        guard !segments.contains(where: { $0 == "." || $0 == ".." }) else {
            throw refused("has a . or .. segment, which clients and web servers remove from a path before the gateway sees it")
        }
        return String(prefix)
    }
}
