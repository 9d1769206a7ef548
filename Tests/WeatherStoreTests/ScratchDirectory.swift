import Foundation

/// A fresh, empty folder under the temporary directory, removed when the test process exits
/// (tests do not remove it themselves): stores stay open until their test ends, so removing the
/// folder earlier would pull files from under a connection, and a run used to leave about twenty
/// of them, WAL files of up to 25 MB among them.
func scratchDirectory(_ prefix: String) throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
    ScratchDirectories.shared.add(dir)
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

final class ScratchDirectories: @unchecked Sendable {
    static let shared = ScratchDirectories()
    private let lock = NSLock()
    private var paths: [String] = []

    private init() { atexit { ScratchDirectories.shared.removeAll() } }

    func add(_ url: URL) { lock.withLock { paths.append(url.path) } }

    func removeAll() {
        lock.withLock {
            for path in paths { try? FileManager.default.removeItem(atPath: path) }
            paths.removeAll()
        }
    }
}
