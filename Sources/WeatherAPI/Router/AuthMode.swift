import WeatherCore

/// How a weather request proved itself (API.md "Authentication").
public enum AuthMode: String, Sendable {
    case weatherSession = "weather_session"
    case weatherToken = "weather_token"
}
