import Foundation
import Testing
@testable import WeatherAPI

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

        Bootstrap.denyWebAccess(toFoldersOf: [data + "/weather.conf", data + "/weather.sqlite3", own + "/w.sqlite3",
                                              "w.sqlite3", program + "/w.sqlite3"])

        let written = try String(contentsOfFile: data + "/.htaccess", encoding: .utf8)
        #expect(written.contains("Require all denied") && written.contains("Deny from all"))
        #expect(try String(contentsOfFile: own + "/.htaccess", encoding: .utf8) == "# the operator's\n")
        #expect(fm.fileExists(atPath: program + "/.htaccess") == programFileBefore, "the program's own folder is left alone")
        #expect(fm.fileExists(atPath: ".htaccess") == cwdFileBefore, "a relative path is left alone")
    }
}
