import Testing
@testable import WeatherCore

@Suite struct ConfigLoaderTests {
    @Test func defaultsMatchTheContract() throws {
        let c = try ConfigLoader.load(environment: [:])
        #expect(c.providers == ["caiyun", "visualcrossing"])
        #expect(c.providerTimeout == 4)
        #expect(c.tokenPolicy == TokenPolicy())
        #expect(
            c.tokenPolicy.accessTTL == 43200 && c.tokenPolicy.refreshAfter == 21600 && c.tokenPolicy.refreshTTL == 2_592_000
                && c.tokenPolicy.refreshRetryWindow == 30)
        #expect(c.cacheTTL == 600 && c.cacheStaleTTL == 21600 && c.gridDegrees == 0.05)
        #expect(c.limits.sessionCreatePerIPPerHour == 30 && c.limits.refreshPerSessionPerHour == 60)
        #expect(c.limits.requestsPerSessionPerHour == 120 && c.limits.requestsPerIPPerHour == 1200)
        #expect(c.limits.gridCellsPerSessionPerDay == 30 && c.limits.legacyRequestsPerIPPerHour == 120)
        #expect(c.legacyToken == nil && c.hashKey == nil)
        #expect(c.caiyunBaseURL == "https://api.caiyunapp.com")
        #expect(c.databasePath == GatewayConfig.defaultDatabasePath)
        #expect(c.hashKeyFile == "/var/lib/closet-weather/hash.key")
        #expect(c.pruneInterval == 90_000, "the workers' clean-up: a day and the prune timer's hour")
    }

    /// The workers' clean-up: off, or at most once an hour (each worker looks hourly).
    @Test func thePruneIntervalIsOffOrAnHourAtLeast() throws {
        #expect(try ConfigLoader.load(environment: ["WEATHER_PRUNE_INTERVAL": "0"]).pruneInterval == 0)
        #expect(try ConfigLoader.load(environment: ["WEATHER_PRUNE_INTERVAL": "3600"]).pruneInterval == 3600)
        #expect(throws: ConfigError(variable: "WEATHER_PRUNE_INTERVAL", problem: "must be 0 (off) or at least 3600 seconds")) {
            try ConfigLoader.load(environment: ["WEATHER_PRUNE_INTERVAL": "60"])
        }
    }

    @Test func environmentWinsOverFile() throws {
        let file = try ConfigLoader.parseFile(
            """
            # comment
            export WEATHER_CACHE_TTL=120
            WEATHER_DB_PATH = "/srv/w.sqlite3"
            WEATHER_TRUSTED_PROXIES=10.0.0.0/8, 2001:db8::/32
            """)
        let c = try ConfigLoader.load(environment: ["WEATHER_CACHE_TTL": "300"], file: file)
        #expect(c.cacheTTL == 300)
        #expect(c.databasePath == "/srv/w.sqlite3")
        #expect(c.trustedProxies.count == 2)
    }

    @Test(arguments: [
        ("WEATHER_CACHE_TTL", "ten"), ("WEATHER_PROVIDER_TIMEOUT", "-1"), ("WEATHER_GRID_DEGREES", "nan"),
        ("WEATHER_PROVIDERS", "caiyun,darksky"), ("WEATHER_TRUSTED_PROXIES", "10.0.0.0/33"), ("CAIYUN_BASE_URL", "ftp://x"),
        ("WEATHER_HASH_KEY", "short"), ("WEATHER_MOUNT_PREFIX", "api"), ("WEATHER_REQUESTS_PER_IP_PER_HOUR", "-5"),
        ("WEATHER_CAHCE_TTL", "5"), ("WEATHER_PRUNE_INTERVAL", "daily"),
    ])
    func badValueNamesTheVariable(name: String, value: String) {
        #expect {
            try ConfigLoader.load(environment: [name: value])
        } throws: { error in
            (error as? ConfigError)?.description.contains(name) == true
        }
    }

    /// The legacy token is whatever app builds already shipped send, so any length is taken (one
    /// under 16 characters stopped every worker from starting until session 35), and a short one
    /// is flagged for the warnings.
    @Test func aShortLegacyTokenIsTakenAndFlagged() throws {
        let short = try ConfigLoader.load(environment: ["CLOSET_WEATHER_PROXY_TOKEN": "app1x"])
        #expect(short.legacyToken == "app1x" && short.legacyTokenIsShort)
        #expect(try !ConfigLoader.load(environment: ["CLOSET_WEATHER_PROXY_TOKEN": "0123456789abcdef"]).legacyTokenIsShort)
        #expect(try !ConfigLoader.load(environment: [:]).legacyTokenIsShort, "no token, nothing to guess")
    }

    /// A file saved with CRLF line ends (Windows, then uploaded to a shared host) reads as the
    /// same settings: it was one line to Swift, whose first value took in all the others, so
    /// the legacy token became "token\r\nWEATHER_CACHE_TTL=120\r\n" and every legacy call was 401.
    @Test func aFileWithCRLFLineEndsReadsAsTheSameSettings() throws {
        let lines = [
            "# settings", "CLOSET_WEATHER_PROXY_TOKEN=legacy-token-0123456789abcdef", "WEATHER_CACHE_TTL=120", "", "export WEATHER_DB_PATH='/srv/w.sqlite3'",
        ]
        let lf = try ConfigLoader.parseFile(lines.joined(separator: "\n") + "\n")
        #expect(lf.count == 3)
        #expect(try ConfigLoader.parseFile(lines.joined(separator: "\r\n") + "\r\n") == lf)
        #expect(try ConfigLoader.parseFile(lines.joined(separator: "\r")) == lf)  // old Mac
        #expect(lf["CLOSET_WEATHER_PROXY_TOKEN"] == "legacy-token-0123456789abcdef" && lf["WEATHER_CACHE_TTL"] == "120")
        #expect(throws: ConfigError(variable: "line 2", problem: "is not KEY=VALUE")) {
            try ConfigLoader.parseFile("WEATHER_CACHE_TTL=1\r\nWEATHER_GRID_DEGREES\r\n")
        }
    }

    /// `KEY=value   # note` makes the note part of the value, as it always did (a systemd
    /// `EnvironmentFile` reads it so too; refusing it made an upgrade lose a database named
    /// with its note): kept, and named by `readSettingsFile` (names only), so that start-up and
    /// `weatherctl check` can say so. A quoted value, `#` without a space before it, a comment
    /// line and an overridden name are not named.
    @Test func aTrailingCommentInTheFileIsKeptAndNamed() throws {
        let text = """
            # settings
            CLOSET_WEATHER_PROXY_TOKEN=legacy-secret-0123456789   # shipped in app 1.x
            export CAIYUN_API_TOKEN=caiyun-secret\t#key
            WEATHER_PLATFORMS= # default
            VISUAL_CROSSING_API_KEY="vc #secret"
            WEATHER_DB_PATH=/srv/w#1.sqlite3
            """
        let read = try ConfigLoader.readSettingsFile(text)
        let (values, commented) = (read.values, read.commented)
        #expect(commented == ["CAIYUN_API_TOKEN", "CLOSET_WEATHER_PROXY_TOKEN", "WEATHER_PLATFORMS"])
        #expect(values["CLOSET_WEATHER_PROXY_TOKEN"] == "legacy-secret-0123456789   # shipped in app 1.x")
        #expect(values["VISUAL_CROSSING_API_KEY"] == "vc #secret" && values["WEATHER_DB_PATH"] == "/srv/w#1.sqlite3")
        // A setting whose `=` was forgotten is not repeated with its value run on, from the file
        // or from the environment (an `EnvironmentFile` line).
        for line in ["WEATHER_HASH_KEYq3Zk8vJ2mR7tY1wX5nB0cD4fG6hK9p0123456789=", "CLOSET_WEATHER_PROXY_TOKENLEGACY0123456789ABCDEF=1"] {
            #expect {
                try ConfigLoader.load(environment: [:], file: ConfigLoader.parseFile(line + "\n"))
            } throws: { error in
                let text = "\(error)"
                return text.contains("not shown") && !text.contains("q3Zk8") && !text.contains("LEGACY0123")
            }
        }
        #expect {
            try ConfigLoader.load(environment: ["WEATHER_HASH_KEYq3Zk8vJ2mR7tY1wX5nB0cD4fG6hK9p0123456789": ""])
        } throws: { error in "\(error)".contains("not shown") && !"\(error)".contains("q3Zk8") }
        #expect(throws: ConfigError(variable: "WEATHER_CAHCE_TTL", problem: "is not a known setting")) {
            try ConfigLoader.load(environment: [:], file: ["WEATHER_CAHCE_TTL": "5"])
        }
        // WEATHER_CONFIG names the file: inside it, it was passed over without a word.
        #expect(throws: ConfigError(variable: "WEATHER_CONFIG", problem: "is read from the environment only, not from the settings file")) {
            try ConfigLoader.load(environment: [:], file: ConfigLoader.parseFile("WEATHER_CONFIG=/etc/other.conf\n"))
        }
    }

    /// A refresh token that would die before the access token it renews is refused at start.
    @Test func aRefreshTokenTTLNotAboveTheAccessTTLIsRefused() throws {
        for (refresh, access) in [("100", nil), ("43200", nil), ("600", "600")] as [(String, String?)] {
            var env = ["WEATHER_REFRESH_TOKEN_TTL": refresh]
            if let access { env["WEATHER_ACCESS_TOKEN_TTL"] = access; env["WEATHER_REFRESH_AFTER"] = "300" }
            #expect(throws: ConfigError(variable: "WEATHER_REFRESH_TOKEN_TTL", problem: "must exceed WEATHER_ACCESS_TOKEN_TTL")) {
                try ConfigLoader.load(environment: env)
            }
        }
        #expect(try ConfigLoader.load(environment: ["WEATHER_REFRESH_TOKEN_TTL": "43201"]).tokenPolicy.refreshTTL == 43201)
    }

    @Test func fileLineWithoutEqualsIsRefused() {
        #expect(throws: ConfigError.self) { try ConfigLoader.parseFile("WEATHER_CACHE_TTL\n") }
    }

    /// A secret typed into the wrong place is refused without being repeated in the message
    /// (which goes to the log and to `weatherctl check`).
    @Test func refusedSettingsNeverRepeatWhatCouldBeASecret() {
        let secret = "Zm9vYmFyU0VDUkVUS0VZMTIzNDU2Nzg5MA"
        for (file, environment) in [
            ("CAIYUN_API_TOKEN: \(secret)==\n", [String: String]()),
            ("\(secret)=1\n", [:]),
            ("", ["WEATHER_PROVIDER_TIMEOUT": secret]),
            ("", ["WEATHER_GRID_DEGREES": "sk_live_\(secret)"]),
            ("", ["WEATHER_PROVIDERS": "caiyun,\(secret)"]),
            ("", ["WEATHER_PROVIDERS": "visualcrossing \(secret)"]),
            ("", ["WEATHER_TRUSTED_PROXIES": "127.0.0.1,\(secret)"]),
            ("", ["WEATHER_TRUSTED_PROXIES": "0123456789abcdef0123456789abcdef"]),
        ] {
            do {
                _ = try ConfigLoader.load(environment: environment, file: try ConfigLoader.parseFile(file))
                Issue.record("accepted \(file) \(environment)")
            } catch {
                #expect(!error.description.contains(secret.prefix(12)) && !error.description.contains("0123456789abcdef"), "\(error)")
            }
        }
        // A mistyped number is still shown, which is what the operator needs to see.
        do {
            _ = try ConfigLoader.load(environment: ["WEATHER_PROVIDER_TIMEOUT": "4s"])
            Issue.record("accepted 4s")
        } catch {
            #expect(error.variable == "WEATHER_PROVIDER_TIMEOUT" && error.problem.hasSuffix("got \"4s\""), "\(error)")
        }
        // So are a mistyped provider name and CIDR.
        #expect(throws: ConfigError(variable: "WEATHER_PROVIDERS", problem: "names an unknown provider \"caiyn\" (caiyun, visualcrossing)")) {
            try ConfigLoader.load(environment: ["WEATHER_PROVIDERS": "caiyn"])
        }
        // A provider named twice would be called twice when it fails.
        #expect(throws: ConfigError(variable: "WEATHER_PROVIDERS", problem: "names caiyun twice")) {
            try ConfigLoader.load(environment: ["WEATHER_PROVIDERS": "caiyun,visualcrossing, caiyun"])
        }
        #expect(throws: ConfigError(variable: "WEATHER_TRUSTED_PROXIES", problem: "has an invalid CIDR \"10.0.0.0/33\"")) {
            try ConfigLoader.load(environment: ["WEATHER_TRUSTED_PROXIES": "10.0.0.0/33"])
        }
        #expect(throws: ConfigError(variable: "line 2", problem: "has no setting name before `=` (letters, digits and _)")) {
            try ConfigLoader.parseFile("# settings\nCAIYUN_API_TOKEN: x=y\n")
        }
    }

    /// Printing, dumping or interpolating a configuration shows no secret.
    @Test func aPrintedConfigurationHidesItsSecrets() throws {
        let secrets = ["hash-key-SECRET-0123456789abcdefghijklmn", "legacy-SECRET-0123456789", "caiyun-SECRET-0123", "vc-SECRET-0123"]
        let c = try ConfigLoader.load(environment: [
            "WEATHER_HASH_KEY": secrets[0], "CLOSET_WEATHER_PROXY_TOKEN": secrets[1],
            "CAIYUN_API_TOKEN": secrets[2], "VISUAL_CROSSING_API_KEY": secrets[3], "WEATHER_CACHE_TTL": "321",
        ])
        var dumped = ""
        dump(c, to: &dumped)
        for text in [String(describing: c), String(reflecting: c), "\(c)", dumped] {
            #expect(!text.contains("SECRET"), "\(text)")
            #expect(text.contains("<redacted>") && text.contains("321"), "\(text)")
        }
    }

    /// A provider base URL is read by `HTTPURL.parseBase`, the parser the provider client reads
    /// the URLs it fetches with, and kept without trailing slashes, its scheme in lowercase.
    @Test func providerBaseURLsAreKeptAsTheClientReadsThem() throws {
        let c = try ConfigLoader.load(environment: [
            "CAIYUN_BASE_URL": "HTTPS://[::1]:8443/proxy/caiyun//", "VISUAL_CROSSING_BASE_URL": "http://127.0.0.1:19500/",
        ])
        #expect(c.caiyunBaseURL == "https://[::1]:8443/proxy/caiyun" && c.visualCrossingBaseURL == "http://127.0.0.1:19500")
        for host in ["255.255.255.255", "weather-1.internal", "localhost", "2001.example", "xn--wttr-loa.example"] {
            #expect(try ConfigLoader.load(environment: ["CAIYUN_BASE_URL": "https://\(host)"]).caiyunBaseURL == "https://\(host)")
        }
        #expect(try ConfigLoader.load(environment: ["CAIYUN_BASE_URL": ""]).caiyunBaseURL == "https://api.caiyunapp.com", "empty: the default")
    }

    /// A base URL the client could not fetch from stops start-up naming the variable and what is
    /// wrong with it, not the value (a key pasted into a base URL would be printed).
    @Test(arguments: [
        ("ftp://files.example.com", HTTPURL.Problem.scheme), ("api.caiyunapp.com", .scheme), ("https:/api.example.com", .scheme),
        ("https://", .host), ("https:///v2.6", .host), ("https://:8443", .host), ("http://[::1", .host), ("https://exa%41mple.com", .host),
        ("http://[:]", .host), ("http://./x", .host), ("https://api..example.com", .host), ("http://999.1.1.1", .host), ("http://10.1", .host),
        ("https://h:0", .port), ("https://h:65536", .port), ("https://h:", .port), ("https://h:443x", .port), ("https://h:80:81", .port),
        ("https://user:Zm9vYmFyU0VDUkVU@api.example.com", .userInfo), ("https://token@api.example.com/", .userInfo),
        ("https://api.example.com/a b", .character), ("https://api .example.com", .character), ("https://h/\u{7F}", .character),
        ("https://h/caf\u{E9}", .character), ("https://h/%zz", .character), ("https://h/{x}", .character),
        ("https://h/?key=Zm9vYmFyU0VDUkVU", .query), ("https://h/#top", .fragment),
    ])
    func aBaseURLTheClientCouldNotFetchIsRefused(url: String, problem: HTTPURL.Problem) {
        for name in ["CAIYUN_BASE_URL", "VISUAL_CROSSING_BASE_URL"] {
            #expect(
                throws: ConfigError(
                    variable: name, problem: "must be an http:// or https:// base URL (scheme://host[:port][/path]); this one \(problem)")
            ) {
                try ConfigLoader.load(environment: [name: url])
            }
        }
        #expect(!"\(problem)".contains("Zm9v"))
    }

    /// `WEATHER_PROVIDERS` of commas and spaces named no provider: with the keys set, every
    /// weather request was 503. Empty is still the default order, as for every setting.
    @Test func aProviderListNamingNoProviderIsRefused() throws {
        for list in [",", " , ,", " ", "\t"] {
            #expect {
                try ConfigLoader.load(environment: ["WEATHER_PROVIDERS": list, "CAIYUN_API_TOKEN": "caiyun-token"])
            } throws: { error in
                (error as? ConfigError)?.variable == "WEATHER_PROVIDERS" && (error as? ConfigError)?.problem.hasPrefix("names no provider") == true
            }
        }
        #expect(try ConfigLoader.load(environment: ["WEATHER_PROVIDERS": ""]).providers == ["caiyun", "visualcrossing"])
        #expect(try ConfigLoader.load(environment: [:], file: ConfigLoader.parseFile("WEATHER_PROVIDERS=  \n")).providers == GatewayConfig.knownProviders)
    }

    /// A configured provider whose base URL is plain http:// to another host would send its key
    /// unencrypted (the workers say so at start, `weatherctl check` warns); loopback, https and a
    /// provider without a key are fine.
    @Test func aKeyInClearTextIsKnown() throws {
        let keys = ["CAIYUN_API_TOKEN": "caiyun-token", "VISUAL_CROSSING_API_KEY": "vc-key"]
        func clear(_ settings: [String: String]) throws -> [String] {
            try ConfigLoader.load(environment: keys.merging(settings) { $1 }).providerKeysInClearText
        }
        #expect(try clear([:]).isEmpty, "the defaults are https")
        #expect(try clear(["CAIYUN_BASE_URL": "http://api.caiyunapp.com"]) == ["CAIYUN_BASE_URL"])
        #expect(
            try clear(["CAIYUN_BASE_URL": "HTTP://10.0.0.5:8080/caiyun", "VISUAL_CROSSING_BASE_URL": "http://vc.internal"]) == [
                "CAIYUN_BASE_URL", "VISUAL_CROSSING_BASE_URL",
            ])
        for local in ["http://127.0.0.1:9000", "http://localhost:9000", "http://[::1]:9000", "http://127.8.9.10", "https://api.caiyunapp.com"] {
            #expect(try clear(["CAIYUN_BASE_URL": local]).isEmpty, "\(local)")
        }
        #expect(try ConfigLoader.load(environment: ["CAIYUN_BASE_URL": "http://api.caiyunapp.com"]).providerKeysInClearText.isEmpty, "no key, nothing sent")
        #expect(try clear(["CAIYUN_BASE_URL": "http://api.caiyunapp.com", "WEATHER_PROVIDERS": "visualcrossing"]).isEmpty, "not called")
    }

    /// A key whose provider `WEATHER_PROVIDERS` leaves out is never used (`weatherctl check` warns).
    @Test func aKeyedProviderLeftOutOfTheListIsKnown() throws {
        let keys = ["CAIYUN_API_TOKEN": "caiyun-token", "VISUAL_CROSSING_API_KEY": "vc-key"]
        let c = try ConfigLoader.load(environment: keys.merging(["WEATHER_PROVIDERS": "caiyun"]) { $1 })
        #expect(c.configuredProviders == ["caiyun"] && c.keyedProvidersLeftOut == ["visualcrossing"])
        #expect(try ConfigLoader.load(environment: keys).keyedProvidersLeftOut.isEmpty)
        #expect(try ConfigLoader.load(environment: ["WEATHER_PROVIDERS": "caiyun"]).keyedProvidersLeftOut.isEmpty, "no key, nothing unused")
    }

    /// The prefix is compared with the decoded request path: spaces and non-ASCII characters
    /// are written as they are (they matched before, and must still), an escape, `?`, `#`,
    /// control characters and empty, `.` or `..` segments are refused, naming no value.
    @Test func theMountPrefixIsAPathAsTheRouterComparesIt() throws {
        for (text, prefix) in [
            ("/", ""), ("///", ""), ("/api", "/api"), ("/api/", "/api"), ("/api/v1.2/~me", "/api/v1.2/~me"), ("/a@b:c;d=e", "/a@b:c;d=e"),
            ("/my api", "/my api"), ("/wetter-\u{E4}", "/wetter-\u{E4}"),
        ] {
            #expect(try ConfigLoader.load(environment: ["WEATHER_MOUNT_PREFIX": text]).mountPrefix == prefix, "\(text)")
        }
        #expect(try ConfigLoader.load(environment: ["WEATHER_MOUNT_PREFIX": ""]).mountPrefix == "")
        let notAPath = "holds ?, # or a control character: it is the path before /v1, without a query or fragment"
        for (text, problem) in [
            ("api", "must start with / (e.g. /api)"), ("https://example.com/api", "must start with / (e.g. /api)"),
            ("/api/%41", "holds %: write the prefix unencoded (it is compared with the request's decoded path)"),
            ("/api?x=1", notAPath), ("/api#v1", notAPath), ("/api\t", notAPath), ("/a\u{7F}", notAPath),
            ("/api//v1", "has an empty segment (//)"),
            ("/api/../v1", "has a . or .. segment, which clients and web servers remove from a path before the gateway sees it"),
            ("/./api", "has a . or .. segment, which clients and web servers remove from a path before the gateway sees it"),
        ] {
            #expect(throws: ConfigError(variable: "WEATHER_MOUNT_PREFIX", problem: problem), "\(text)") {
                try ConfigLoader.load(environment: ["WEATHER_MOUNT_PREFIX": text])
            }
        }
    }

    /// The file has no comments after a value: when such a value is refused, the message says
    /// where a comment goes, not only that `600 # ten minutes` is not a number; the value set in
    /// the environment instead gets no such hint, and a commented value that is accepted (a
    /// token) still loads, as before.
    @Test func aRefusedValueWithATrailingCommentSaysCommentsGoOnTheirOwnLine() throws {
        let hint = "put a comment on a line of its own"
        for line in [
            "WEATHER_CACHE_TTL=600 # ten minutes", "WEATHER_MOUNT_PREFIX=/api   # behind nginx", "CAIYUN_BASE_URL=https://api.caiyunapp.com # default",
            "WEATHER_PROVIDERS=caiyun\t# only caiyun", "WEATHER_CACHE_TTL=#600",
        ] {
            let read = try ConfigLoader.readSettingsFile(line + "\n")
            let (file, commented) = (read.values, read.commented)
            let name = String(line.prefix { $0 != "=" })
            #expect {
                try ConfigLoader.load(environment: [:], file: file, commented: commented)
            } throws: { error in
                let e = error as? ConfigError
                return e?.variable == name && e?.problem.hasSuffix(hint + ")") == true && e?.description.contains("minutes") == false
            }
            #expect {
                try ConfigLoader.load(environment: [name: "/ not valid?anywhere"], file: file, commented: commented)
            } throws: { error in
                (error as? ConfigError)?.variable == name && !"\(error)".contains(hint)
            }
        }
        let read = try ConfigLoader.readSettingsFile("CLOSET_WEATHER_PROXY_TOKEN=legacy-secret-0123456789 # app 1.x\n")
        let (file, commented) = (read.values, read.commented)
        #expect(try ConfigLoader.load(environment: [:], file: file, commented: commented).legacyToken == "legacy-secret-0123456789 # app 1.x")
    }

    /// A setting given on more than one line of the file takes the last line's value, as before
    /// and as systemd reads it, and is named with its lines (an operator who appended
    /// `CAIYUN_API_TOKEN=` below the example's empty one, or who reads the file from the top,
    /// cannot tell which counts). Not refused: a file that served before must still serve after
    /// an upgrade. A repeated name that is not a setting is refused without being repeated.
    @Test func aSettingGivenTwiceInTheFileTakesItsLastLineAndIsNamed() throws {
        let file = try ConfigLoader.readSettingsFile(
            "# settings\nWEATHER_CACHE_TTL=600\nWEATHER_GRID_DEGREES=0.05\n\nexport WEATHER_CACHE_TTL = 120\nWEATHER_CACHE_TTL=90\n")
        #expect(file.values["WEATHER_CACHE_TTL"] == "90")
        #expect(file.repeated.map(\.description) == ["WEATHER_CACHE_TTL (lines 2, 5 and 6)"])
        #expect(try ConfigLoader.load(environment: [:], file: file.values).cacheTTL == 90)
        let token = try ConfigLoader.readSettingsFile("CAIYUN_API_TOKEN=\r\n# mine:\r\nCAIYUN_API_TOKEN=caiyun-secret\r\nWEATHER_CACHE_TTL=60\r\n")
        #expect(token.values["CAIYUN_API_TOKEN"] == "caiyun-secret" && token.repeated == [.init(name: "CAIYUN_API_TOKEN", lines: [1, 3])])
        #expect(try ConfigLoader.readSettingsFile("WEATHER_CACHE_TTL=60\nWEATHER_GRID_DEGREES=0.05\n").repeated.isEmpty)
        // Only the line whose value is used says whether it holds a comment.
        let superseded = try ConfigLoader.readSettingsFile("CLOSET_WEATHER_PROXY_TOKEN=# retired\nCLOSET_WEATHER_PROXY_TOKEN=\"#legacy-0123456789\"\n")
        #expect(superseded.commented.isEmpty && superseded.values["CLOSET_WEATHER_PROXY_TOKEN"] == "#legacy-0123456789")
        #expect(try ConfigLoader.readSettingsFile("WEATHER_CACHE_TTL=60\nWEATHER_CACHE_TTL=600 # ten minutes\n").commented == ["WEATHER_CACHE_TTL"])
        let unknown = try ConfigLoader.readSettingsFile("Zm9vYmFyU0VDUkVUS0VZMTIz=1\nZm9vYmFyU0VDUkVUS0VZMTIz=1\n")
        #expect(unknown.repeated.isEmpty)
        #expect {
            try ConfigLoader.load(environment: [:], file: unknown.values)
        } throws: { error in "\(error)".contains("not shown") && !"\(error)".contains("Zm9v") }
    }

    @Test func zeroTurnsALimitOff() throws {
        let c = try ConfigLoader.load(environment: ["WEATHER_REQUESTS_PER_IP_PER_HOUR": "0"])
        #expect(!Quota(limit: c.limits.requestsPerIPPerHour, window: 3600).isEnabled)
    }
}

@Suite struct GCRATests {
    let quota = Quota(limit: 4, window: 3600)

    @Test func allowsBurstOfLimitThenRefusesWithTruthfulWait() {
        var tat: Int64? = nil
        let now: Int64 = 1_000_000
        for _ in 0..<4 {
            let d = GCRA.decide(tat: tat, nowMs: now, quota: quota)
            #expect(d.allowed)
            tat = d.newTAT
        }
        let refused = GCRA.decide(tat: tat, nowMs: now, quota: quota)
        #expect(!refused.allowed)
        #expect(refused.retryAfter == 900)
        #expect(!GCRA.decide(tat: tat, nowMs: now + 899_000, quota: quota).allowed)
        #expect(GCRA.decide(tat: tat, nowMs: now + 900_000, quota: quota).allowed)
    }

    /// A TAT more than a window ahead was written under a clock since set back: the bucket is
    /// full again, where it refused with a `Retry-After` of the whole step (12 h, or weeks after
    /// a month's step). Within a window ahead it is an ordinary, partly used bucket.
    @Test func aBucketFromAClockSinceSetBackIsFullAgain() {
        let now: Int64 = 1_000_000_000
        var tat: Int64? = nil
        for _ in 0..<4 { tat = GCRA.decide(tat: tat, nowMs: now + 43_200_000, quota: quota).newTAT }  // 12 h ahead
        let back = GCRA.decide(tat: tat, nowMs: now, quota: quota)
        #expect(back.allowed && back.retryAfter == 0)
        #expect(back.newTAT == now + 900_000, "counted from now, as a fresh bucket")
        #expect(GCRA.giveBack(tat: tat!, units: 1, nowMs: now, quota: quota) == now)
        // Filled ten minutes ago by this clock: ahead by less than the window, a real wait.
        var full: Int64? = nil
        for _ in 0..<4 { full = GCRA.decide(tat: full, nowMs: now - 600_000, quota: quota).newTAT }
        let refused = GCRA.decide(tat: full, nowMs: now, quota: quota)
        #expect(!refused.allowed && refused.retryAfter == 300)
        // A request stamped a few seconds before the take that emptied the bucket (its body came
        // slowly) finds it empty, not "full again" (it got a whole new burst, a review found).
        var emptied: Int64? = nil
        for _ in 0..<4 { emptied = GCRA.decide(tat: emptied, nowMs: now, quota: quota).newTAT }
        #expect(!GCRA.decide(tat: emptied, nowMs: now - 10_000, quota: quota).allowed)
        #expect(GCRA.giveBack(tat: emptied!, units: 1, nowMs: now - 10_000, quota: quota) == emptied! - 900_000)
    }

    /// A stored TAT far in the past (a damaged or hand-edited row, `Int64.min`) is a full bucket:
    /// giving a lease back subtracted from it and trapped, after every response of the worker.
    @Test func aTATFromBeforeAnyClockIsAFullBucket() {
        let now: Int64 = 1_000_000_000
        for tat in [Int64.min, Int64.min + 1, -1, now - 1, now] {
            #expect(GCRA.giveBack(tat: tat, units: 64, nowMs: now, quota: quota) == now)
            #expect(GCRA.decide(tat: tat, nowMs: now, quota: quota) == GCRA.Decision(allowed: true, newTAT: now + 900_000, retryAfter: 0))
        }
    }

    @Test func leasesOnlyFromABucketWithRoomForManyAndGiveBackRestoresIt() {
        let big = Quota(limit: 1000, window: 3600)  // one unit per 3600 ms
        let lease = GCRA.take(tat: nil, nowMs: 0, quota: big, upTo: 65)
        #expect(lease == GCRA.Take(granted: 65, newTAT: 65 * 3600, retryAfter: 0))
        // 1000 - 65 = 935 free: less than 8 x 65 = 520? No, more: still leases.
        #expect(GCRA.take(tat: lease.newTAT, nowMs: 0, quota: big, upTo: 65).granted == 65)
        // A lease is at most an eighth of the free units: 1000 free → 125, 600 free → 75.
        #expect(GCRA.take(tat: nil, nowMs: 0, quota: big, upTo: 257).granted == 125)
        #expect(GCRA.take(tat: 400 * 3600, nowMs: 0, quota: big, upTo: 257).granted == 75)
        // With 515 free an eighth (64) is below the minimum lease: only the one unit.
        #expect(GCRA.take(tat: 485 * 3600, nowMs: 0, quota: big, upTo: 65).granted == 1)
        // Asking for a lease never refuses what a single request would get.
        #expect(GCRA.take(tat: 999 * 3600, nowMs: 0, quota: big, upTo: 65).granted == 1)
        let empty = GCRA.take(tat: 1000 * 3600, nowMs: 0, quota: big, upTo: 65)
        #expect(empty.granted == 0 && empty.retryAfter == 4)
        // Giving 64 back is as if they had never been taken; never fuller than full.
        #expect(GCRA.giveBack(tat: lease.newTAT, units: 64, nowMs: 0, quota: big) == 3600)
        #expect(GCRA.giveBack(tat: lease.newTAT, units: 64, nowMs: 100_000, quota: big) == 100_000)
        #expect(GCRA.decide(tat: nil, nowMs: 5, quota: big) == GCRA.Decision(allowed: true, newTAT: 3605, retryAfter: 0))
    }

    @Test func noDoubleBurstAtAnyBoundary() {
        // Spend the bucket, then at any later moment at most one interval's worth comes back.
        var tat: Int64? = nil
        for _ in 0..<4 { tat = GCRA.decide(tat: tat, nowMs: 0, quota: quota).newTAT }
        var allowed = 0
        var t = tat
        for _ in 0..<10 {
            let d = GCRA.decide(tat: t, nowMs: 3_600_000, quota: quota)
            if d.allowed { allowed += 1; t = d.newTAT }
        }
        #expect(allowed == 4)  // a full hour later: a full bucket, not 8
    }
}

@Suite struct AddressTests {
    @Test func forwardedForOnlyFromTrustedPeers() {
        let trusted = [CIDR("10.0.0.0/8")!, CIDR("2001:db8::/32")!]
        #expect(ClientAddress.quotaKey(remoteAddr: "203.0.113.5", forwardedFor: "1.2.3.4", trusted: trusted) == "203.0.113.5")
        #expect(ClientAddress.quotaKey(remoteAddr: "10.1.2.3", forwardedFor: "1.2.3.4", trusted: trusted) == "1.2.3.4")
        #expect(ClientAddress.quotaKey(remoteAddr: "10.1.2.3", forwardedFor: "6.6.6.6, 1.2.3.4, 10.9.9.9", trusted: trusted) == "1.2.3.4")
        #expect(ClientAddress.quotaKey(remoteAddr: "2001:db8::1", forwardedFor: "2001:DB8:0:0:0:0:0:7, 2a00:1450::5", trusted: trusted) == "2a00:1450:0:0::/64")
        #expect(ClientAddress.quotaKey(remoteAddr: "10.1.2.3", forwardedFor: "garbage", trusted: trusted) == "10.1.2.3")
        #expect(ClientAddress.quotaKey(remoteAddr: "::1", forwardedFor: nil, trusted: []) == "0:0:0:0::/64")
        // Per-IP quotas count an IPv6 client's whole /64, however it spells its address.
        for address in ["2001:db8:0:1::2", "2001:DB8:0:1:ffff:ffff:ffff:ffff", "2001:0db8:0000:0001:0:0:0:b"] {
            #expect(ClientAddress.quotaKey(remoteAddr: address, forwardedFor: nil, trusted: []) == "2001:db8:0:1::/64")
        }
        #expect(ClientAddress.quotaKey(remoteAddr: "2001:db8:0:2::2", forwardedFor: nil, trusted: []) == "2001:db8:0:2::/64")
        #expect(ClientAddress.quotaKey(remoteAddr: "10.1.2.3", forwardedFor: "2a00:1450:4001:81c::200e", trusted: trusted) == "2a00:1450:4001:81c::/64")
        #expect(ClientAddress.quotaKey(remoteAddr: "203.0.113.5", forwardedFor: nil, trusted: []) == "203.0.113.5")
        #expect(ClientAddress.quotaKey(remoteAddr: "::ffff:203.0.113.5", forwardedFor: nil, trusted: []) == "203.0.113.5")
    }

    /// The shortcut that keeps a peer's dotted address as its key is taken exactly when parsing
    /// and writing it back would give the same text (leading zeros, `::ffff:` forms, anything not
    /// four parts of 0–255 take the long way).
    @Test func aCanonicalIPv4KeyIsTheAddressAsItCame() {
        var samples = [
            "0.0.0.0", "255.255.255.255", "127.0.0.1", "10.0.0.10", "010.0.0.1", "1.02.3.4", "1.2.3.00", "256.1.1.1",
            "1.2.3", "1.2.3.4.", ".1.2.3.4", "1..2.3", "1.2.3.4.5", "1.2.3.1000", "", "a.b.c.d", "1.2.3.4 ", "::ffff:1.2.3.4",
            "0001.2.3.4", "1.2.3.-4", "९.1.1.1",
        ]
        var rng = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            let parts = (0..<Int.random(in: 3...5, using: &rng)).map { _ -> String in
                let n = Int.random(in: 0...300, using: &rng)
                return Bool.random(using: &rng) ? String(n) : "0" + String(n)
            }
            samples.append(parts.joined(separator: "."))
        }
        for text in samples {
            let written = IPAddress(text).flatMap { $0.isV4 ? $0.description : nil }
            #expect(ClientAddress.isCanonicalIPv4(text) == (written == text), "\(text)")
            // Any IPv4 spelling counts under its written form, by the shortcut or not.
            if let written { #expect(ClientAddress.quotaKey(remoteAddr: text, forwardedFor: nil, trusted: []) == written, "\(text)") }
        }
        // A trusted proxy's forwarded client still wins over the shortcut.
        #expect(ClientAddress.quotaKey(remoteAddr: "10.1.2.3", forwardedFor: "1.2.3.4", trusted: [CIDR("10.0.0.0/8")!]) == "1.2.3.4")
    }

    @Test func cidrMatching() {
        #expect(CIDR("192.168.0.0/16")!.contains(IPAddress("192.168.44.1")!))
        #expect(!CIDR("192.168.0.0/16")!.contains(IPAddress("192.169.0.1")!))
        #expect(CIDR("::ffff:0:0/96")!.contains(IPAddress("1.2.3.4")!))
        #expect(CIDR("fe80::/10")!.contains(IPAddress("fe80::1234")!))
        #expect(IPAddress("1.2.3") == nil && IPAddress("1::2::3") == nil && IPAddress("256.1.1.1") == nil)
    }
}

@Suite struct GridAndDateTests {
    @Test func snappingKeepsOnlyGridPoints() {
        let p = GridPoint.snapping(lat: 31.2304, lon: 121.4737, degrees: 0.05)
        #expect(p == GridPoint(lat: 31.25, lon: 121.45))
        #expect(p.key == "31.25,121.45")
        #expect(GridPoint.snapping(lat: -0.01, lon: 179.99, degrees: 0.05) == GridPoint(lat: 0, lon: -180))
        #expect(GridPoint.snapping(lat: 90, lon: -180, degrees: 0.05).lat == 90)
    }

    /// Keys are written from millionths now; they must be the text `Double` printing gave before
    /// (cache rows and limiter keys of a running gateway keep their names across an upgrade).
    @Test func keysAreTheTextDoublePrintingGave() {
        func before(_ v: Double) -> String { v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : "\(v)" }
        var values: [Double] = [
            0, 90, -90, 180, -180, 31.25, -0.05, 0.05, 121.45, 0.0001, -0.0001, 0.00005, 0.000001, 1e-7, 31.2304, 1e9, 1e15, 1e16, 0.1 + 0.2,
        ]
        for degrees in [0.05, 0.01, 0.1, 0.25, 0.003, 0.0001] {
            for i in stride(from: -90.0, through: 90.0, by: 0.37) {
                let p = GridPoint.snapping(lat: i, lon: i * 1.99, degrees: degrees)
                values += [p.lat, p.lon]
            }
        }
        var random = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { values.append((Double(Int64.random(in: -180_000_000...180_000_000, using: &random)) / 1_000_000)) }
        for v in values {
            #expect(GridPoint.format(v) == before(v), "\(v)")
        }
        #expect(GridPoint(lat: -0.05, lon: 121).key == "-0.05,121")
    }

    /// The cell key and the cache key written into one buffer (session 29) are the texts the key
    /// and the interpolation `"\(key)|\(cacheKind)"` gave: cache rows keep their names.
    @Test func cacheKeysAreTheCellKeyAndTheInterpolationTheyReplaced() throws {
        func kindBefore(_ q: WeatherQuery) -> String {
            switch q {
            case .forecast(let days): return "forecast:\(days)"
            case .trip(let start, let end): return "trip:\(start):\(end)"
            case .outlook: return "forecast"
            }
        }
        let start = try #require(LocalDate("2026-12-20")), end = try #require(LocalDate("2026-12-24"))
        let queries: [WeatherQuery] =
            [.outlook, .trip(start: start, end: end), .trip(start: end, end: end)] + (-3...20).map { .forecast(days: $0) } + [
                .forecast(days: Int.max), .forecast(days: Int.min),
            ]
        // The longest texts a coordinate can have (24 bytes each, `GridPoint.maxCoordinateBytes`).
        let longest = [-2.2250738585072014e-308, -1.7976931348623157e308]
        for v in longest { #expect(GridPoint.format(v).utf8.count == GridPoint.maxCoordinateBytes, "\(v)") }
        var points = [
            GridPoint(lat: longest[0], lon: longest[1]), GridPoint(lat: longest[1], lon: longest[0]), GridPoint(lat: 31.25, lon: 121.45),
            GridPoint(lat: -0.05, lon: 121), GridPoint(lat: 0, lon: -180), GridPoint(lat: -89.999999, lon: -179.999999),
            GridPoint(lat: 0.00005, lon: 1e16), GridPoint(lat: -2.2250738585072014e-308, lon: 1e15),
        ]
        for i in stride(from: -90.0, through: 90.0, by: 7.3) { points.append(GridPoint.snapping(lat: i, lon: i * 1.99, degrees: 0.003)) }
        for p in points {
            for q in queries {
                #expect(q.cacheKind == kindBefore(q), "\(q)")
                let keys = p.cacheKeys(q)
                #expect(keys.cell == p.key && keys.cache == "\(p.key)|\(kindBefore(q))", "\(p) \(q): \(keys)")
            }
        }
    }

    @Test func timestampsRoundTripTheWireFormat() {
        let t = Timestamp(iso8601: "2026-06-03T20:00:00Z")!
        #expect(t.iso8601 == "2026-06-03T20:00:00Z")
        #expect(Timestamp(seconds: 0).iso8601 == "1970-01-01T00:00:00Z")
        #expect(Timestamp(iso8601: "2026-06-03T24:00:00Z") == nil)
        #expect(Timestamp(iso8601: "2026-06-03 20:00:00Z") == nil)
    }

    @Test func localDatesValidateAndAdd() {
        #expect(LocalDate("2028-02-29") != nil)
        #expect(LocalDate("2026-02-29") == nil)
        #expect(LocalDate("2026-12-31")!.adding(days: 1).description == "2027-01-01")
        #expect(LocalDate("2028-02-29")!.adding(years: 1).description == "2029-02-28")
        #expect(LocalDate("2028-02-29")!.adding(years: 4).description == "2032-02-29")
        #expect(LocalDate("2027-03-02")!.adding(years: 1).description == "2028-03-02")
        #expect(LocalDate("2026-1-01") == nil)
    }

    /// The table behind `isBase64URL` accepts exactly the bytes the shift-and-mask check it
    /// replaced did (session 29), and `isRequestIdText` those and `.` and `@` (session 30: Apache's
    /// `UNIQUE_ID` holds `@`): every byte value, anywhere in the text.
    @Test func base64URLIsExactlyItsAlphabet() {
        func check(_ text: String, requestId: Bool) -> Bool {
            requestId ? TokenSyntax.isRequestIdText(text) : TokenSyntax.isBase64URL(text)
        }
        func before(_ b: UInt8, dot: Bool) -> Bool {
            let low: UInt64 = 0x03FF_2000_0000_0000 | (dot ? 1 << 46 : 0)
            let high: UInt64 = 0x07FF_FFFE_87FF_FFFE | (dot ? 1 : 0)
            let bits = b < 64 ? low >> UInt64(b) : b < 128 ? high >> UInt64(b - 64) : 0
            return bits & 1 == 1
        }
        var accepted = 0
        for b in 0...127 {
            let c = String(UnicodeScalar(UInt8(b)))
            for dot in [false, true] {
                for text in [c, "ab" + c, c + "yz", "wta_" + c] {
                    #expect(check(text, requestId: dot) == before(UInt8(b), dot: dot), "\(b) requestId=\(dot) in \(text.debugDescription)")
                }
                if before(UInt8(b), dot: dot) { accepted += 1 }
            }
        }
        #expect(accepted == 64 + 66)
        #expect(TokenSyntax.isRequestIdText("VAYyin8AAAEAAAKa@DMAAAAB") && !TokenSyntax.isBase64URL("VAYyin8AAAEAAAKa@DMAAAAB"))
        for text in ["é", "a\u{00FF}", "\u{1F600}", "ab\u{0080}", "apache-t=1", "a b", "a:b"] {
            #expect(!TokenSyntax.isBase64URL(text) && !TokenSyntax.isRequestIdText(text), "\(text.debugDescription)")
        }
        #expect(TokenSyntax.isBase64URL("!!!abc", from: 3) && !TokenSyntax.isBase64URL("!!!abc", from: 2))
        #expect(TokenSyntax.isBase64URL("abc", from: 3) && !TokenSyntax.isBase64URL("abc", from: 4))
        #expect(TokenSyntax.isBase64URL(""))
    }

    @Test func tokenSyntax() {
        #expect(TokenSyntax.isUUID("0B6F1C4E-6f5a-4c0e-9d2b-2c1e8f3a7d11"))
        #expect(!TokenSyntax.isUUID("0b6f1c4e6f5a4c0e9d2b2c1e8f3a7d11"))
        #expect(TokenSyntax.isWellFormed("wta_" + String(repeating: "a", count: 43), kind: .access))
        #expect(!TokenSyntax.isWellFormed("wta_" + String(repeating: "a", count: 42) + "=", kind: .access))
        #expect(!TokenSyntax.isWellFormed("wtr_" + String(repeating: "a", count: 43), kind: .access))
        #expect(!TokenSyntax.isWellFormed("wta_" + String(repeating: "a", count: 42) + "é", kind: .access))
        #expect(TokenSyntax.isSessionId("aws_0193a1b2c3dAbc_-09xyZ"))
        #expect(!TokenSyntax.isSessionId("aws_"))
        #expect(!TokenSyntax.isSessionId("aws_abc.def"))
    }

    /// The ASCII fast path gives exactly what `String(validating:)` gives, valid or not.
    @Test func validUTF8StringMatchesStringValidating() {
        var rng = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = [
            [0x61], [0x7A], [0x00], [0x25], [0x7F], [0xC3, 0xA9], [0xE4, 0xB8, 0xAD],
            [0xF0, 0x9F, 0x98, 0x80], [0x80], [0xC3], [0xFF], [0xED, 0xA0, 0x80], [0xEF, 0xBF, 0xBD],
        ]
        for _ in 0..<3_000 {
            let bytes = (0..<Int.random(in: 0...8, using: &rng)).flatMap { _ in pieces.randomElement(using: &rng)! }
            let fast = bytes.withUnsafeBufferPointer(validUTF8String)
            #expect(fast == String(validating: bytes, as: UTF8.self), "\(bytes)")
        }
    }

    /// The string check (a bit set over the string's bytes) against the byte-by-byte definition,
    /// on every byte value and on random strings of base64url, `.`, `@`, and other bytes; and the
    /// request-id check (base64url, `.` and `@`) likewise.
    @Test func base64URLStringCheckMatchesTheByteDefinition() {
        func expected(_ s: String, from: Int, requestId: Bool) -> Bool {
            let u = Array(s.utf8)
            func base64URL(_ c: UInt8) -> Bool { (65...90).contains(c) || (97...122).contains(c) || (48...57).contains(c) || c == 45 || c == 95 }
            return from <= u.count && u[from...].allSatisfy { base64URL($0) || (requestId && ($0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@"))) }
        }
        for b in 0..<128 {
            let s = String(decoding: [UInt8(b)], as: UTF8.self)
            #expect(TokenSyntax.isBase64URL(s) == expected(s, from: 0, requestId: false), "byte \(b)")
            #expect(TokenSyntax.isRequestIdText(s) == expected(s, from: 0, requestId: true), "byte \(b)")
        }
        var rng = SystemRandomNumberGenerator()
        let alphabet = Array("ABCXYZabcxyz0189-_.@~ é\u{0}/=+".unicodeScalars)
        for _ in 0..<2_000 {
            let s = String(String.UnicodeScalarView((0..<Int.random(in: 0...12, using: &rng)).map { _ in alphabet.randomElement(using: &rng)! }))
            let from = Int.random(in: 0...3, using: &rng)
            #expect(TokenSyntax.isBase64URL(s, from: from) == expected(s, from: from, requestId: false), "\(s.debugDescription) from \(from)")
            #expect(TokenSyntax.isRequestIdText(s) == expected(s, from: 0, requestId: true), "\(s.debugDescription)")
        }
    }
}
