import Foundation

/// The provider fixtures copied into the test bundle, and JSON surgery to make variations of them.
enum Fixture {
    static let caiyunWeather = "caiyun-v2.6-weather"
    static let caiyunError = "caiyun-v2.6-error-400"
    static let vcForecast = "visualcrossing-timeline-forecast"
    static let vcTrip = "visualcrossing-timeline-trip"

    struct Missing: Error { var name: String }

    static func bytes(_ name: String) throws -> [UInt8] {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures") else {
            throw Missing(name: name)
        }
        return Array(try Data(contentsOf: url))
    }

    static func object(_ name: String) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(bytes(name))) as! [String: Any]
    }

    static func encode(_ value: Any) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: value))
    }

    /// Every number rounded to an integer, as real payloads send `5` where fixtures send `5.0`.
    static func integers(_ value: Any) -> Any {
        switch value {
        case let dict as [String: Any]: return dict.mapValues(integers)
        case let array as [Any]: return array.map(integers)
        case let number as NSNumber where !(value is String): return NSNumber(value: Int(number.doubleValue.rounded()))
        default: return value
        }
    }

    /// Adds fields the gateway does not know at every level it reads.
    static func withExtraFields(_ value: Any) -> Any {
        switch value {
        case var dict as [String: Any]:
            dict = dict.mapValues(withExtraFields)
            dict["x_unknown_field"] = ["nested": [1, 2.5, "s", NSNull()]]
            return dict
        case let array as [Any]:
            return array.map(withExtraFields)
        default:
            return value
        }
    }
}
