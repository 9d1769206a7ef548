import WeatherCore

/// Builds the weather source from configuration (filled in once the provider clients land).
public enum ProviderWiring {
    public static func source(for config: GatewayConfig) -> (any WeatherSource)? { nil }
}
