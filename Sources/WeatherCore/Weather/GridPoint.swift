/// A point on the snapping grid: the only coordinates the gateway ever keeps, sends or returns.
public struct GridPoint: Codable, Sendable, Hashable {
    public var lat: Double
    public var lon: Double

    public init(lat: Double, lon: Double) {
        self.lat = lat
        self.lon = lon
    }

    /// Snaps raw coordinates to the nearest grid node of `degrees` spacing.
    ///
    /// The result is rounded to 6 decimals so that `31.25` prints as `31.25`, not `31.250000000000004`,
    /// and longitude 180 folds onto -180 so both edges of the antimeridian share one cell.
    public static func snapping(lat: Double, lon: Double, degrees: Double) -> GridPoint {
        precondition(degrees > 0 && degrees.isFinite, "grid spacing must be positive")
        func snap(_ v: Double) -> Double {
            let s = (v / degrees).rounded() * degrees
            return (s * 1_000_000).rounded() / 1_000_000
        }
        var snappedLon = snap(lon)
        if snappedLon >= 180 { snappedLon -= 360 }
        if snappedLon < -180 { snappedLon += 360 }
        let snappedLat = min(90, max(-90, snap(lat)))
        return GridPoint(lat: snappedLat + 0, lon: snappedLon + 0)  // `+ 0` turns -0.0 into 0.0
    }

    /// A stable text key for caches and limits, e.g. `31.25,121.45`.
    public var key: String { "\(Self.format(lat)),\(Self.format(lon))" }

    /// Shortest decimal text of a snapped coordinate (`31.25`, `-0.05`, `121`).
    public static func format(_ v: Double) -> String {
        if v == v.rounded() && abs(v) < 1e15 { return String(Int(v)) }
        return "\(v)"
    }
}
