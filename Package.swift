// swift-tools-version:6.0
import PackageDescription

/// One settings array for every Swift target, so the whole package reads the same way.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "closet-weather",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "weather-fcgi", targets: ["weather-fcgi"]),
        .executable(name: "weatherctl", targets: ["weatherctl"]),
        .library(name: "WeatherSessionKit", targets: ["WeatherSessionKit"]),
    ],
    targets: [
        // C libraries from Debian packages. Each is imported by exactly one Swift module.
        .systemLibrary(name: "CFastCGI", pkgConfig: "fcgi", providers: [.apt(["libfcgi-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CHTTPClient", pkgConfig: "libssl", providers: [.apt(["libssl-dev", "zlib1g-dev"])]),
        // Our own C: a sanitizer build's default options (`make sanitize`); empty in other builds.
        .target(name: "CSanitizerOptions"),
        // Our own C: the version `make dist` writes into the binaries (`--version`); WeatherAPI's
        // `BuildInfo` is its one reader.
        .target(name: "CBuildInfo"),

        .target(name: "WeatherCore", swiftSettings: swiftSettings),
        .target(name: "WeatherCrypto", dependencies: ["CCrypto", "WeatherCore"], swiftSettings: swiftSettings),
        .target(name: "WeatherStore", dependencies: ["CSQLite", "WeatherCore"], swiftSettings: swiftSettings),
        .target(name: "WeatherProviders", dependencies: ["CHTTPClient", "WeatherCore"], swiftSettings: swiftSettings),
        .target(
            name: "WeatherAPI",
            dependencies: ["WeatherCore", "WeatherCrypto", "WeatherStore", "WeatherProviders", "CBuildInfo"],
            swiftSettings: swiftSettings
        ),
        .target(name: "FastCGIRuntime", dependencies: ["CFastCGI", "WeatherAPI", "WeatherCore"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "weather-fcgi",
            dependencies: ["FastCGIRuntime", "WeatherAPI", "WeatherStore", "WeatherCore", "CSanitizerOptions"],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "weatherctl",
            dependencies: ["WeatherAPI", "WeatherStore", "WeatherCore", "WeatherCrypto", "WeatherProviders", "CSanitizerOptions"],
            swiftSettings: swiftSettings
        ),
        .target(name: "WeatherSessionKit", swiftSettings: swiftSettings),

        .testTarget(name: "WeatherCoreTests", dependencies: ["WeatherCore"], swiftSettings: swiftSettings),
        .testTarget(name: "WeatherCryptoTests", dependencies: ["WeatherCrypto", "WeatherCore"], swiftSettings: swiftSettings),
        .testTarget(name: "WeatherStoreTests", dependencies: ["WeatherStore", "WeatherCore"], swiftSettings: swiftSettings),
        .testTarget(
            name: "WeatherProvidersTests",
            dependencies: ["WeatherProviders", "WeatherCore", "CHTTPClient"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        .testTarget(name: "WeatherAPITests", dependencies: ["WeatherAPI", "WeatherCore", "WeatherStore", "WeatherProviders"], swiftSettings: swiftSettings),
        .testTarget(name: "EndToEndTests", dependencies: ["WeatherCore", "WeatherSessionKit"], swiftSettings: swiftSettings),
        .testTarget(name: "WeatherSessionKitTests", dependencies: ["WeatherSessionKit"], swiftSettings: swiftSettings),
    ]
)
