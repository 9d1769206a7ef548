extension GatewayConfig: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Every setting but the four secrets (hash key, legacy token, provider keys), which show as
    /// `<redacted>` or `nil`: `print`, `dump`, string interpolation and a failed test expectation
    /// on a configuration are safe. A setting added later is left out until it is listed here.
    public var customMirror: Mirror {
        func secret(_ value: String?) -> String { value == nil ? "nil" : "<redacted>" }
        return Mirror(
            self,
            children: [
                "databasePath": databasePath, "hashKey": secret(hashKey), "legacyToken": secret(legacyToken),
                "caiyunToken": secret(caiyunToken), "caiyunBaseURL": caiyunBaseURL,
                "visualCrossingKey": secret(visualCrossingKey), "visualCrossingBaseURL": visualCrossingBaseURL,
                "providers": providers, "providerTimeout": providerTimeout, "providerCooldown": providerCooldown,
                "tokenPolicy": tokenPolicy, "cacheTTL": cacheTTL, "cacheStaleTTL": cacheStaleTTL, "gridDegrees": gridDegrees,
                "limits": limits, "trustedProxies": trustedProxies, "mountPrefix": mountPrefix, "platforms": platforms,
                "maxRequestsPerWorker": maxRequestsPerWorker, "flushInterval": flushInterval, "bodyTimeout": bodyTimeout,
                "pruneInterval": pruneInterval,
            ], displayStyle: .struct)
    }

    public var description: String {
        "GatewayConfig(" + customMirror.children.map { "\($0.label ?? "?"): \($0.value)" }.joined(separator: ", ") + ")"
    }

    public var debugDescription: String { description }
}
