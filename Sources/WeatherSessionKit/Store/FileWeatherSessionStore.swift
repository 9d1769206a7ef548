import Foundation
#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A ``WeatherSessionStore`` that keeps each item in its own file in one directory.
///
/// For Linux clients and for tests; on Apple platforms prefer ``KeychainWeatherSessionStore``
/// (files in an app's container go into its backups, refresh token included, and come back on
/// another phone, where the two would revoke each other's session through replay detection).
///
/// - The directory is created (mode 0700, with intermediates) on the first write if missing.
/// - Files are created with mode 0600 from the first byte: the temporary file is opened with
///   `O_CREAT | O_EXCL` and mode 0600, so there is no moment at which another user could read it.
/// - Writes are atomic: write a temporary file in the same directory, `fsync`, then `rename(2)`
///   over the old one. A crash leaves the old file or the new one, never half of either.
/// - File names are ``WeatherSessionStoreItem`` raw values (`installation-id`, `session`).
public struct FileWeatherSessionStore: WeatherSessionStore {
    /// The directory that holds the files.
    public let directory: URL

    /// Creates a store over `directory`; nothing touches the disk until the first call.
    public init(directory: URL) {
        self.directory = directory
    }

    /// The file that holds `item`.
    public func fileURL(for item: WeatherSessionStoreItem) -> URL {
        directory.appendingPathComponent(item.rawValue, isDirectory: false)
    }

    /// The bytes of `item`'s file, or `nil` when the file does not exist.
    public func read(_ item: WeatherSessionStoreItem) throws -> Data? {
        let path = fileURL(for: item).path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw WeatherSessionStoreError.fileSystem(operation: "open", path: path, errno: errno)
        }
        defer { _ = close(fd) }

        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = buffer.withUnsafeMutableBytes { systemRead(fd, $0.baseAddress!, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw WeatherSessionStoreError.fileSystem(operation: "read", path: path, errno: errno)
            }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    /// Atomically replaces `item`'s file with `data`, mode 0600.
    public func write(_ data: Data, for item: WeatherSessionStoreItem) throws {
        let temporaryPath = try temporaryCopy(of: data, for: item)
        let finalPath = fileURL(for: item).path
        guard rename(temporaryPath, finalPath) == 0 else {
            let error = WeatherSessionStoreError.fileSystem(operation: "rename", path: finalPath, errno: errno)
            _ = unlink(temporaryPath)
            throw error
        }
        syncDirectory()
    }

    /// Creates `item`'s file with `data` unless it exists, in which case its bytes are returned.
    /// Atomic across processes: the complete file is linked into place (`link(2)` refuses an
    /// existing name), so a reader never sees it half written and of two adders one wins.
    public func add(_ data: Data, for item: WeatherSessionStoreItem) throws -> Data? {
        let temporaryPath = try temporaryCopy(of: data, for: item)
        defer { _ = unlink(temporaryPath) }
        let finalPath = fileURL(for: item).path
        while true {
            if link(temporaryPath, finalPath) == 0 {
                syncDirectory()
                return nil
            }
            guard errno == EEXIST else {
                throw WeatherSessionStoreError.fileSystem(operation: "link", path: finalPath, errno: errno)
            }
            // Deleted between the link and the read: try the link again.
            if let existing = try read(item) { return existing }
        }
    }

    /// A new file beside `item`'s holding `data`, mode 0600, flushed to disk; its path.
    private func temporaryCopy(of data: Data, for item: WeatherSessionStoreItem) throws -> String {
        try createDirectoryIfMissing()
        let temporaryPath =
            directory
            .appendingPathComponent(".\(item.rawValue).\(UUID().uuidString).tmp", isDirectory: false)
            .path

        let fd = open(temporaryPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw WeatherSessionStoreError.fileSystem(operation: "open", path: temporaryPath, errno: errno)
        }
        do {
            defer { _ = close(fd) }
            // The umask can only remove bits from 0600; fchmod makes the mode exact regardless.
            try check(fchmod(fd, 0o600), "fchmod", temporaryPath)
            try writeAll(data, to: fd, path: temporaryPath)
            try check(fsync(fd), "fsync", temporaryPath)
        } catch {
            _ = unlink(temporaryPath)
            throw error
        }
        return temporaryPath
    }

    /// Removes `item`'s file; a missing file is fine.
    public func delete(_ item: WeatherSessionStoreItem) throws {
        let path = fileURL(for: item).path
        if unlink(path) != 0, errno != ENOENT {
            throw WeatherSessionStoreError.fileSystem(operation: "unlink", path: path, errno: errno)
        }
        syncDirectory()
    }

    private func createDirectoryIfMissing() throws {
        let path = directory.path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            return
        }
        // 0700: the files are 0600 anyway, but their names need not be listable by others either.
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true,
            attributes: [.posixPermissions: NSNumber(value: 0o700)]
        )
    }

    private func writeAll(_ data: Data, to fd: Int32, path: String) throws {
        try data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = systemWrite(fd, base + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw WeatherSessionStoreError.fileSystem(operation: "write", path: path, errno: errno)
                }
                offset += written
            }
        }
    }

    /// Makes the rename itself durable. Deliberately best effort: if it fails (some file systems
    /// refuse `fsync` on a directory), a power cut can at worst bring back the previous complete
    /// file, which the service treats like any stale session.
    private func syncDirectory() {
        let fd = open(directory.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        _ = close(fd)
    }

    private func check(_ result: Int32, _ operation: String, _ path: String) throws {
        if result != 0 {
            throw WeatherSessionStoreError.fileSystem(operation: operation, path: path, errno: errno)
        }
    }
}

// The store's own `read`/`write` methods shadow the C functions inside the type.
private func systemRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
    return Darwin.read(fd, buffer, count)
    #elseif canImport(Glibc)
    return Glibc.read(fd, buffer, count)
    #elseif canImport(Musl)
    return Musl.read(fd, buffer, count)
    #endif
}

private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Darwin)
    return Darwin.write(fd, buffer, count)
    #elseif canImport(Glibc)
    return Glibc.write(fd, buffer, count)
    #elseif canImport(Musl)
    return Musl.write(fd, buffer, count)
    #endif
}
