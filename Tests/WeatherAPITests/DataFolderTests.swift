import Foundation
import Testing
@testable import WeatherAPI
import WeatherCore

/// The deny-all `.htaccess` a shared-hosting worker writes into its data folder (end to end under
/// Apache: `DeployTests.aDataFolderInsideTheDocumentRootIsRefusedOnceTheProgramHasRun`). Here:
/// where it is written, and where it must never be.
@Suite struct DataFolderTests {
    @Test func onlyAbsoluteFoldersOtherThanTheProgramsOwnAndNeverOverAnOperatorsFile() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("cw-deny-\(UUID().uuidString.prefix(8))")
        defer { try? fm.removeItem(at: root) }
        let data = root.appendingPathComponent("closet-weather-data").path, own = root.appendingPathComponent("own").path
        try fm.createDirectory(atPath: data, withIntermediateDirectories: true)
        try fm.createDirectory(atPath: own, withIntermediateDirectories: true)
        try "# the operator's\n".write(toFile: own + "/.htaccess", atomically: true, encoding: .utf8)
        let program = try #require(Bootstrap.programFolder())
        let programFileBefore = fm.fileExists(atPath: program + "/.htaccess")
        let cwdFileBefore = fm.fileExists(atPath: ".htaccess")

        // Under the program's umask (027 at least), still readable by a web server of another user.
        let umaskBefore = umask(0o077)
        Bootstrap.denyWebAccess(toFoldersOf: [
            data + "/weather.conf", data + "/weather.sqlite3", own + "/w.sqlite3",
            "w.sqlite3", program + "/w.sqlite3",
        ])
        umask(umaskBefore)

        let written = try String(contentsOfFile: data + "/.htaccess", encoding: .utf8)
        #expect(written.contains("Require all denied") && written.contains("Deny from all"))
        var st = stat()
        #expect(stat(data + "/.htaccess", &st) == 0 && st.st_mode & 0o777 == 0o644)
        #expect(try String(contentsOfFile: own + "/.htaccess", encoding: .utf8) == "# the operator's\n")
        #expect(fm.fileExists(atPath: program + "/.htaccess") == programFileBefore, "the program's own folder is left alone")
        #expect(fm.fileExists(atPath: ".htaccess") == cwdFileBefore, "a relative path is left alone")
    }

    /// A new scratch folder (the caller removes it) and the path of a `weather.conf` in it.
    func settingsFile(_ tag: String) throws -> (folder: URL, path: String) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(tag)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return (folder, folder.appendingPathComponent("weather.conf").path)
    }

    /// `CLOSET_WEATHER_PROXY_TOKEN= # retired` turned the legacy path on with the note as its
    /// token: an unquoted file value that is only a note is refused; a token that starts with #
    /// is still taken in quotes or from the environment (one fixed in shipped apps may).
    @Test func aLegacyTokenThatIsOnlyANoteIsRefused() throws {
        let (root, path) = try settingsFile("cw-note")
        defer { try? FileManager.default.removeItem(at: root) }
        try "CLOSET_WEATHER_PROXY_TOKEN= # retired, was in app 1.x\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            try Bootstrap.loadConfig(environment: ["WEATHER_CONFIG": path])
        } throws: { error in
            "\(error)".contains("CLOSET_WEATHER_PROXY_TOKEN is a comment in the settings file") && !"\(error)".contains("app 1.x")
        }
        try "CLOSET_WEATHER_PROXY_TOKEN=\"#legacy-token-in-app-1x\"\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try Bootstrap.loadConfig(environment: ["WEATHER_CONFIG": path]).legacyToken == "#legacy-token-in-app-1x")
        #expect(try Bootstrap.loadConfig(environment: ["CLOSET_WEATHER_PROXY_TOKEN": "#legacy-token-in-app-1x"]).legacyToken == "#legacy-token-in-app-1x")
    }

    /// A configuration file's error says which file (the settings may come from several places),
    /// by its role, not its path (API.md: no file path in a log line), and when it cannot be read,
    /// why; the refused line's content is still never shown.
    @Test func aConfigurationFilesErrorNamesTheFile() throws {
        let fm = FileManager.default
        let (root, path) = try settingsFile("cw-conf")
        defer { try? fm.removeItem(at: root) }
        try "WEATHER_CACHE_TTL=60\nsecret-looking-line-without-equals\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect {
            try Bootstrap.loadConfig(environment: ["WEATHER_CONFIG": path])
        } throws: { error in
            "\(error)" == "configuration: the file WEATHER_CONFIG names, line 2, is not KEY=VALUE" && !"\(error)".contains(path)
        }
        let missing = root.appendingPathComponent("missing.conf").path
        #expect {
            try Bootstrap.loadConfig(environment: ["WEATHER_CONFIG": missing])
        } throws: { error in
            "\(error)" == "the file WEATHER_CONFIG names cannot be read: No such file or directory (weatherctl check prints its path)"
        }
    }

    /// The workers' reading of a key file, which `weatherctl check` shares: line ends and the
    /// spaces at the ends do not count, spaces inside do; a key file written by the workers
    /// reads as its 64 hex digits. (check read only LF, CR and every space away, and passed a
    /// key of 31 characters and a tab that the workers refused.)
    @Test func aHashKeyFileReadsAsTheWorkersReadIt() {
        let hex = String(repeating: "0123456789abcdef", count: 4)
        #expect(Bootstrap.hashKey(fromFileText: hex + "\n") == Array(hex.utf8))
        #expect(Bootstrap.hashKey(fromFileText: " \t" + hex + " \r") == Array(hex.utf8))
        #expect(Bootstrap.hashKey(fromFileText: String(repeating: "k", count: 31) + "\t") == nil)
        #expect(Bootstrap.hashKey(fromFileText: String(repeating: "k", count: 16) + " " + String(repeating: "k", count: 15) + "\n")?.count == 32)
        #expect(Bootstrap.hashKey(fromFileText: "\n\n") == nil)
        // Kept as it always was: every stored installation hash depends on these bytes.
        #expect(Bootstrap.hashKey(fromFileText: hex + "\r\n") == Array((hex + "\r\n").utf8))
    }

    /// A worker does not create a database where one was: beside its `-writer` page (deleted or
    /// moved: a new empty one dropped every session with no word), or beside its `-wal` (deleted
    /// under running workers: SQLite would discard the `-wal` a running worker may still need).
    /// A disaster-recovery drill found both. A fresh folder still gets its database, and so does
    /// a folder whose `hash.key` serves another database.
    @Test func aWorkerDoesNotCreateADatabaseWhereOneWas() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("cw-gone-\(UUID().uuidString.prefix(8))")
        try fm.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: root) }
        let db = root.appendingPathComponent("weather.sqlite3").path
        let config = try ConfigLoader.load(environment: ["WEATHER_DB_PATH": db])

        fm.createFile(atPath: db + "-writer", contents: Data(count: 4096))
        #expect { _ = try Bootstrap.openStore(config) } throws: { "\($0)".contains("missing but its -writer page is there") }
        #expect(!fm.fileExists(atPath: db))

        fm.createFile(atPath: db + "-wal", contents: Data(count: 4096))
        #expect { _ = try Bootstrap.openStore(config) } throws: { "\($0)".contains("missing but its -wal or -shm is still there") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: db + "-wal")).count == 4096, "the -wal is left as it was")

        try fm.removeItem(atPath: db + "-wal")
        try fm.removeItem(atPath: db + "-writer")
        fm.createFile(atPath: config.hashKeyFile, contents: Data(String(repeating: "k", count: 64).utf8))
        #expect(throws: Never.self) { _ = try Bootstrap.openStore(config) }
        #expect(fm.fileExists(atPath: db), "a fresh folder gets its database")
    }

    /// The key file appears whole or not at all: written to a file of the process's own and linked
    /// into place (created in place and written after, a worker killed in between left an empty
    /// `hash.key` that stopped every later start). Nothing of the temporary file is left, a
    /// leftover of an earlier process with the same pid is no obstacle, and the file is 0600.
    @Test func aNewHashKeyFileAppearsWhole() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("cw-key-\(UUID().uuidString.prefix(8))")
        try fm.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: root) }
        let config = try ConfigLoader.load(environment: ["WEATHER_DB_PATH": root.appendingPathComponent("weather.sqlite3").path])
        let leftover = root.appendingPathComponent(".hash.key.new-\(getpid())").path
        fm.createFile(atPath: leftover, contents: Data("half".utf8))
        var created = 0
        let key = try Bootstrap.hashKey(for: config, sessionsStored: { false }, created: { created += 1 })
        #expect(created == 1 && key.count == 64)
        let text = try String(contentsOfFile: config.hashKeyFile, encoding: .utf8)
        #expect(text.count == 65 && text.hasSuffix("\n") && Array(text.dropLast().utf8) == key)
        let left = try fm.contentsOfDirectory(atPath: root.path)
        #expect(left == ["hash.key"], "no temporary file left: \(left)")
        let mode = try #require(try fm.attributesOfItem(atPath: config.hashKeyFile)[.posixPermissions] as? Int)
        #expect(mode == 0o600)
        // The next start reads it and creates nothing.
        #expect(try Bootstrap.hashKey(for: config, sessionsStored: { true }, created: { created += 1 }) == key && created == 1)
    }

    /// A folder where the hash key file belongs is named as what it is, not as "readable by others".
    @Test func aHashKeyPathThatIsAFolderIsSaidToBeNoFile() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("cw-key-\(UUID().uuidString.prefix(8))")
        try fm.createDirectory(at: root.appendingPathComponent("hash.key"), withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: root) }
        let config = try ConfigLoader.load(environment: ["WEATHER_DB_PATH": root.appendingPathComponent("weather.sqlite3").path])
        #expect {
            try Bootstrap.hashKey(for: config, sessionsStored: { false })
        } throws: { error in
            "\(error)".hasSuffix("is not a regular file")
        }
    }
}
