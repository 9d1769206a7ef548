/// Why a run stopped early. Each carries the one line printed on standard error.
enum CLIError: Error {
    /// The command line itself is wrong (exit 64, as sysexits' `EX_USAGE`).
    case usage(String)
    /// The command was understood but could not be carried out (exit 1).
    case failure(String)

    var message: String {
        switch self {
        case .usage(let m), .failure(let m): m
        }
    }

    var exitCode: Int32 {
        switch self {
        case .usage: ExitCode.usage
        case .failure: ExitCode.failure
        }
    }
}
