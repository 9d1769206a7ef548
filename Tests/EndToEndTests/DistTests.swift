import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The release bundle of `make dist` (scripts/dist.sh, docs/dist.md), unpacked into an empty folder
/// and run the way a host without a Swift toolchain or libfcgi would run it.
///
/// The tarball is built once per test run (a release build in `.build-dist`, about a minute when
/// warm); `CW_DIST_TARBALL=/path/to/closet-weather-....tar.gz` tests an existing one instead.
@Suite(.serialized, .timeLimit(.minutes(15))) struct DistTests {
    /// glibc's own libraries: the only ones the binaries may take from the host.
    static let glibc: Set<String> = [
        "linux-vdso.so.1", "ld-linux-x86-64.so.2", "libc.so.6", "libm.so.6", "libmvec.so.1", "libpthread.so.0",
        "libdl.so.2", "librt.so.1", "libresolv.so.2", "libutil.so.1", "libanl.so.1",
    ]

    /// An empty environment apart from a minimal PATH (`env -i` style).
    static let scrubbed = ["PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": ""]

    @Test func bundleHasTheDocumentedLayout() throws {
        let b = try UnpackedBundle()
        let fm = FileManager.default
        #expect(try fm.contentsOfDirectory(atPath: b.parent.path) == [b.root.lastPathComponent])
        #expect(b.root.lastPathComponent == String(b.tarball.lastPathComponent.dropLast(".tar.gz".count)))
        #expect(b.root.lastPathComponent.hasPrefix("closet-weather-"))
        #expect(b.root.lastPathComponent.hasSuffix("-linux-x86_64"))
        for exe in ["bin/weather-fcgi", "bin/weatherctl"] {
            #expect(fm.isExecutableFile(atPath: b.path(exe)), "\(exe)")
        }
        for file in ["htdocs/.htaccess", "htdocs/privacy.html", "deploy/nginx/closet-weather.conf", "INSTALL.md", "README.md", "CHANGELOG.md"] {
            #expect(fm.fileExists(atPath: b.path(file)), "\(file)")
        }
        // Every file INSTALL.md sends the reader to is in the bundle (it named docs/dist.md,
        // docs/openapi.json and the release notes, which were not; a shared-hosting drill).
        let install = try String(contentsOfFile: b.path("INSTALL.md"), encoding: .utf8)
        let named = Set(
            install.matches(of: /(?:docs|deploy|htdocs)\/[A-Za-z0-9_.\/-]*[A-Za-z0-9]/).map { String($0.output) }
                + ["README.md", "CHANGELOG.md"])
        for path in named where !path.hasSuffix("/") {
            #expect(fm.fileExists(atPath: b.path(path)), "INSTALL.md names \(path)")
        }
        let migrations = try fm.contentsOfDirectory(atPath: b.path("migrations")).sorted()
        #expect(migrations.contains { $0.hasPrefix("0001_") && $0.hasSuffix(".sql") }, "\(migrations)")
        let repoMigrations = try fm.contentsOfDirectory(atPath: repositoryRoot.appendingPathComponent("migrations").path)
            .filter { $0.hasSuffix(".sql") }.sorted()
        #expect(migrations == repoMigrations)
        // lib/ holds shared libraries only, under their sonames.
        for lib in (try? fm.contentsOfDirectory(atPath: b.path("lib"))) ?? [] {
            #expect(lib.contains(".so"), "\(lib)")
        }
        let size = try #require(try b.tarball.resourceValues(forKeys: [.fileSizeKey]).fileSize)
        #expect(size < 64 << 20, "tarball is \(size) bytes")
    }

    @Test func healthAnswersAsCGIWithAnEmptyEnvironment() throws {
        let b = try UnpackedBundle()
        var env = Self.scrubbed
        env["REQUEST_METHOD"] = "GET"
        env["REQUEST_URI"] = "/v1/health"
        env["WEATHER_DB_PATH"] = b.parent.appendingPathComponent("w.sqlite3").path
        // Bounded: a CGI program that did not notice CGI would wait for FastCGI connections.
        let run = ChildProcessOutput.runData("/usr/bin/timeout", ["-k", "5", "30", b.path("bin/weather-fcgi")], environment: env)
        let out = String(decoding: run.stdout, as: UTF8.self)
        #expect(run.status == 0, "\(out)")
        #expect(out.hasPrefix("Status: 200 OK\r\n"), "\(out)")
        let body = try #require(out.components(separatedBy: "\r\n\r\n").last)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        #expect(json["status"] as? String == "ok")
    }

    /// Both programs say the bundle's version (written into them by dist.sh), so an operator can
    /// tell which release a host runs; they said nothing of it before session 27.
    @Test func bothProgramsSayTheBundlesVersion() throws {
        let b = try UnpackedBundle()
        let version = String(b.root.lastPathComponent.dropFirst("closet-weather-".count).dropLast("-linux-x86_64".count))
        #expect(!version.isEmpty && version != "dev", "\(b.root.lastPathComponent)")
        for exe in ["weather-fcgi", "weatherctl"] {
            let run = ChildProcessOutput.runData(b.path("bin/\(exe)"), ["--version"], environment: Self.scrubbed)
            #expect(run.status == 0)
            #expect(String(decoding: run.stdout, as: UTF8.self) == "\(exe) \(version)\n")
        }
    }

    @Test func everyLibraryResolvesInsideTheBundleOrToGlibc() throws {
        let b = try UnpackedBundle()
        let out = ChildProcessOutput.run("/usr/bin/ldd", [b.path("bin/weather-fcgi"), b.path("bin/weatherctl")], environment: Self.scrubbed)
        let libDir = b.root.resolvingSymlinksInPath().path + "/lib/"
        var resolved: [String: String] = [:]
        for line in out.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) }) where !line.isEmpty {
            if line.hasSuffix(":") { continue }  // "…/bin/weather-fcgi:" headers
            #expect(!line.contains("not found"), "\(line)")
            let parts = line.split(separator: " ").map(String.init)
            let (name, path) = parts.count >= 3 && parts[1] == "=>" ? (parts[0], parts[2]) : (parts[0], parts[0])
            if Self.glibc.contains(name) || Self.glibc.contains((path as NSString).lastPathComponent) { continue }
            let real = URL(fileURLWithPath: path).standardized.resolvingSymlinksInPath().path
            #expect(real.hasPrefix(libDir), "\(name) resolves outside the bundle: \(path)")
            resolved[name] = real
        }
        #expect(!resolved.isEmpty, "\(out)")
        // The FastCGI library in particular never comes from the build host.
        let fcgi = try #require(resolved.first { $0.key.hasPrefix("libfcgi.") }, "\(out)")
        #expect(fcgi.value.hasPrefix(libDir))
        // No Swift or C++ runtime is loaded from anywhere: they are linked in.
        #expect(
            !resolved.keys.contains { $0.hasPrefix("libswift") || $0.hasPrefix("libFoundation") || $0.hasPrefix("libstdc++") || $0.hasPrefix("libdispatch") })
    }

    @Test func weatherctlRunsFromTheBundle() throws {
        let b = try UnpackedBundle()
        let help = ChildProcessOutput.runData(b.path("bin/weatherctl"), ["--help"], environment: Self.scrubbed)
        #expect(help.status == 0)
        #expect(String(decoding: help.stdout, as: UTF8.self).contains("migrate"))
        var env = Self.scrubbed
        env["WEATHER_DB_PATH"] = b.parent.appendingPathComponent("ctl.sqlite3").path
        let migrate = ChildProcessOutput.runData(b.path("bin/weatherctl"), ["migrate", "--json"], environment: env)
        let text = String(decoding: migrate.stdout, as: UTF8.self)
        #expect(migrate.status == 0, "\(text)")
        #expect(text.contains("0001_"), "\(text)")
    }

    /// The strongest form of "runs without a Swift toolchain and without libfcgi": in a private
    /// mount namespace the toolchain's runtime folder is an empty tmpfs and the host copy of every
    /// non-glibc library the binaries need (libfcgi, libsqlite3, libssl, …) reads as an empty
    /// file, so loading any of them fails. Needs root and unshare(1); skipped otherwise.
    @Test(needs(DistTests.canIsolate, "needs root and unshare(1) for a private mount namespace"))
    func runsWithToolchainAndHostLibrariesHidden() throws {
        try requirePrivilege(DistTests.canIsolate, "root and unshare(1)")
        let b = try UnpackedBundle()
        let script = #"""
            set -eu
            bundle=$1 runtime=$2 db=$3 glibc=" $4 "
            [ -n "$runtime" ] && [ -d "$runtime" ] && mount -t tmpfs none "$runtime" && echo "HIDDEN-RUNTIME $(ls -A "$runtime" | wc -l)"
            # Every non-glibc library the binaries ask for (resolved anywhere, before hiding), every
            # file in lib/, and libfcgi by name: their host copies become empty files.
            names=$( { ldd "$bundle/bin/weather-fcgi" "$bundle/bin/weatherctl" | awk '$2 == "=>" {print $1}'; ls "$bundle/lib"; echo libfcgi.so.0; } | sort -u)
            masked=0
            for name in $names; do
              case "$glibc" in *" $name "*) continue ;; esac
              for dir in /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu /usr/lib /lib /usr/local/lib; do
                f="$dir/$name"
                if [ -e "$f" ]; then
                  real=$(readlink -f "$f")
                  if [ -s "$real" ]; then mount --bind /dev/null "$real"; masked=$((masked + 1)); fi
                fi
              done
            done
            echo "MASKED $masked"
            if ldd "$bundle/bin/weather-fcgi" "$bundle/bin/weatherctl" | grep -q 'not found'; then echo "LDD-NOT-FOUND"; fi
            cd "$bundle"
            env -i PATH=/usr/bin:/bin REQUEST_METHOD=GET REQUEST_URI=/v1/health WEATHER_DB_PATH="$db" ./bin/weather-fcgi 2>/dev/null
            echo
            env -i PATH=/usr/bin:/bin ./bin/weatherctl --help >/dev/null 2>&1 && echo "CTL-OK"
            """#
        let run = ChildProcessOutput.runData(
            "/usr/bin/unshare",
            [
                "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh",
                b.root.path, Self.toolchainRuntimeFolder ?? "", b.parent.appendingPathComponent("iso.sqlite3").path,
                Self.glibc.sorted().joined(separator: " "),
            ],
            environment: Self.scrubbed)
        let out = String(decoding: run.stdout, as: UTF8.self)
        #expect(run.status == 0, "\(out)")
        if Self.toolchainRuntimeFolder != nil { #expect(out.contains("HIDDEN-RUNTIME 0"), "\(out)") }
        let masked = out.split(separator: "\n").first { $0.hasPrefix("MASKED ") }.flatMap { Int($0.dropFirst(7)) } ?? 0
        #expect(masked > 0, "no host copy of a bundled library was hidden: \(out)")
        #expect(!out.contains("LDD-NOT-FOUND"), "\(out)")
        #expect(out.contains("Status: 200 OK\r\n"), "\(out)")
        #expect(out.contains("\"status\":\"ok\""), "\(out)")
        #expect(out.contains("CTL-OK"), "\(out)")
    }

    /// Root, and unshare(1) can make a private mount namespace here (containers may forbid it).
    static let canIsolate: Bool = {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else { return false }
        return ChildProcessOutput.runData("/usr/bin/unshare", ["--mount", "--propagation", "private", "/bin/true"]).status == 0
    }()

    /// `…/usr/lib/swift` of the toolchain running these tests (where libswiftCore.so lives), from
    /// this process's own mappings.
    static let toolchainRuntimeFolder: String? = {
        // (/proc files report size 0, so read through cat rather than String(contentsOfFile:).)
        let maps = ChildProcessOutput.run("/bin/cat", ["/proc/\(getpid())/maps"])
        for line in maps.split(separator: "\n") {
            guard let slash = line.firstIndex(of: "/") else { continue }
            let path = String(line[slash...])
            if path.hasSuffix("/libswiftCore.so") {
                // …/usr/lib/swift/linux/libswiftCore.so → …/usr/lib/swift
                let folder = ((path as NSString).deletingLastPathComponent as NSString).deletingLastPathComponent
                return folder.hasSuffix("/lib/swift") ? folder : nil
            }
        }
        return nil
    }()
}

struct DistFailure: Error, CustomStringConvertible {
    let description: String
}

/// The version `make dist` gives a bundle (scripts/dist.sh, docs/dist.md), in a repository of its
/// own: before a tag, builds order by their commit count (they were `0.1.0-g<commit>`, which an
/// operator could not order, session 28); a shallow clone, which cannot count, names the commit.
@Suite struct DistVersionTests {
    @Test func untaggedBuildsOrderByTheirCommitCount() throws {
        let repo = FileManager.default.temporaryDirectory.appendingPathComponent("cw-version-\(UUID().uuidString.prefix(8))")
        defer { try? FileManager.default.removeItem(at: repo) }
        try FileManager.default.createDirectory(at: repo.appendingPathComponent("scripts"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            at: repositoryRoot.appendingPathComponent("scripts/dist.sh"), to: repo.appendingPathComponent("scripts/dist.sh"))
        let identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"]
        func git(_ args: [String], in dir: URL = repo) -> String {
            ChildProcessOutput.run("/usr/bin/git", ["-C", dir.path] + identity + args).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        func version(in dir: URL = repo, _ environment: [String: String] = [:]) -> String {
            var env = ProcessInfo.processInfo.environment
            env["CW_VERSION"] = nil
            env.merge(environment) { $1 }
            return ChildProcessOutput.run("/bin/bash", [dir.appendingPathComponent("scripts/dist.sh").path, "--print-version"], environment: env)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        _ = git(["init", "-q"])
        _ = git(["add", "scripts/dist.sh"])
        _ = git(["commit", "-q", "-m", "one"])
        _ = git(["commit", "-q", "--allow-empty", "-m", "two"])
        #expect(version() == "0.1.0-dev.2.g\(git(["rev-parse", "--short", "HEAD"]))")
        _ = git(["commit", "-q", "--allow-empty", "-m", "three"])
        let third = version()
        #expect(third == "0.1.0-dev.3.g\(git(["rev-parse", "--short", "HEAD"]))")
        try Data("x\n".utf8).write(to: repo.appendingPathComponent("NOTES"))
        _ = git(["add", "NOTES"])
        #expect(version() == third + "-dirty")
        _ = git(["reset", "-q", "--hard"])
        // The order an operator sees: `sort -V` puts the later build last (by the number, not
        // by its digits' text).
        let sorted = ChildProcessOutput.run("/usr/bin/sort", ["-V"], stdin: Data("0.1.0-dev.10.gaaaaaaa\n\(third)\n".utf8))
        #expect(sorted.split(separator: "\n") == [Substring(third), "0.1.0-dev.10.gaaaaaaa"])

        let shallow = repo.appendingPathComponent("shallow")
        _ = ChildProcessOutput.run("/usr/bin/git", ["clone", "-q", "--depth", "1", "file://" + repo.path, shallow.path])
        #expect(version(in: shallow) == "0.1.0-g\(git(["rev-parse", "--short", "HEAD"], in: shallow))")

        _ = git(["tag", "v1.2.0"])
        #expect(version() == "1.2.0")
        #expect(version(["CW_VERSION": "2.0.0-rc.1"]) == "2.0.0-rc.1")
        // What `make dist` would refuse is refused here too, before any build.
        let script = repo.appendingPathComponent("scripts/dist.sh").path
        var long = ProcessInfo.processInfo.environment
        long["CW_VERSION"] = String(repeating: "9", count: 64)
        #expect(ChildProcessOutput.runData("/bin/bash", [script, "--print-version"], environment: long).status != 0)
        #expect(ChildProcessOutput.runData("/bin/bash", [script, "--print-version", "extra"]).status != 0)
    }
}

/// The tarball under test: `CW_DIST_TARBALL`, else built once by scripts/dist.sh (its last stdout line).
let distTarball: Result<URL, DistFailure> = {
    if let given = ProcessInfo.processInfo.environment["CW_DIST_TARBALL"], !given.isEmpty {
        return FileManager.default.fileExists(atPath: given)
            ? .success(URL(fileURLWithPath: given)) : .failure(DistFailure(description: "CW_DIST_TARBALL=\(given) does not exist"))
    }
    let script = repositoryRoot.appendingPathComponent("scripts/dist.sh").path
    let run = ChildProcessOutput.runData("/bin/bash", [script])  // progress and build errors go to stderr
    let lines = String(decoding: run.stdout, as: UTF8.self).split(separator: "\n")
    guard run.status == 0, let last = lines.last, last.hasSuffix(".tar.gz"),
        FileManager.default.fileExists(atPath: String(last))
    else {
        return .failure(DistFailure(description: "scripts/dist.sh exited \(run.status); stdout: \(lines.joined(separator: "\n"))"))
    }
    return .success(URL(fileURLWithPath: String(last)))
}()

/// The tarball unpacked into a fresh, empty temporary folder (removed when this goes away).
final class UnpackedBundle {
    let tarball: URL
    let parent: URL
    let root: URL

    init() throws {
        tarball = try distTarball.get()
        parent = FileManager.default.temporaryDirectory.appendingPathComponent("cw-dist-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: parent, withIntermediateDirectories: true)
        let untar = ChildProcessOutput.runData("/bin/tar", ["-xzf", tarball.path, "-C", parent.path])
        guard untar.status == 0 else { throw DistFailure(description: "tar -xzf \(tarball.path) exited \(untar.status)") }
        let top = try FileManager.default.contentsOfDirectory(atPath: parent.path)
        guard top.count == 1, let only = top.first else { throw DistFailure(description: "expected one top folder, found \(top)") }
        root = parent.appendingPathComponent(only)
    }

    func path(_ relative: String) -> String { root.appendingPathComponent(relative).path }

    deinit { try? FileManager.default.removeItem(at: parent) }
}
