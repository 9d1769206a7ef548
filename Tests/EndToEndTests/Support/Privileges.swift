import Foundation
import Testing

/// Some tests need what a machine may not offer: root, mount(2), unshare(1), the libFuzzer
/// runtime. Where it is missing they are skipped (swift-testing prints each skip with its
/// reason), so a green run alone does not show that they ran. A CI meant to run them sets
/// `CW_REQUIRE_PRIVILEGED=1`: they then run anyway and fail at `requirePrivilege`.
let privilegedTestsRequired = ProcessInfo.processInfo.environment["CW_REQUIRE_PRIVILEGED"] == "1"

/// Runs the test where `available`, or everywhere under `CW_REQUIRE_PRIVILEGED=1`.
func needs(_ available: Bool, _ what: Comment) -> ConditionTrait {
    .enabled(if: available || privilegedTestsRequired, what)
}

/// The first line of a test enabled by `needs`: fails it (rather than letting it fail later in
/// a confusing way) when `CW_REQUIRE_PRIVILEGED=1` ran it without what it needs.
func requirePrivilege(_ available: Bool, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
    try #require(available, "CW_REQUIRE_PRIVILEGED=1, but this machine lacks it: \(what)", sourceLocation: sourceLocation)
}

/// Root, which may run a command as another user (`runuser`) and write anywhere.
let isRoot = getuid() == 0
