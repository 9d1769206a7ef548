/// Exit statuses: 0 done, 1 failed (or a check failed), 64 bad command line.
enum ExitCode {
    static let ok: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
}
