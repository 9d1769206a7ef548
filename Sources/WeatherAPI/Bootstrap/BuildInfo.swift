import CBuildInfo

/// What this build is, for both programs.
public enum BuildInfo {
    /// The release: the bundle's version, which `make dist` writes into the binary's
    /// `.cw_version` section (docs/dist.md, "The version"), or `dev` for a build it did not make.
    public static let version = String(cString: cw_build_version())
}
