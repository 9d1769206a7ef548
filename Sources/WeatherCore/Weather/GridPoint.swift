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
    /// and a node at longitude 180 folds onto -180, so with a spacing that divides 180 (the
    /// default 0.05 does) both edges of the antimeridian share one cell. With one that does not
    /// (0.07), the nodes nearest ±180 are two cells a little less than a spacing apart, and the
    /// latitude clamped to ±90 is off the grid: harmless, the cells there are only smaller.
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
    public var key: String {
        ByteWriter.text(capacity: 2 * Self.maxCoordinateBytes + 1) { writeKey(to: &$0) }
    }

    /// `key` and the cache key of `query` at this cell, `key|kind` (`31.25,121.45|forecast:7`),
    /// written into one buffer on the stack: a weather request needs both, and making the kind
    /// and joining the two by interpolation cost about 1,400 instructions and four allocations of
    /// a cached request's 58,000 (callgrind, session 29).
    public func cacheKeys(_ query: WeatherQuery) -> (cell: String, cache: String) {
        let tripKind = query.tripCacheKind
        let capacity = 2 * Self.maxCoordinateBytes + 2 + (tripKind?.utf8.count ?? WeatherQuery.maxForecastKindBytes)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var w = ByteWriter(buffer)
            writeKey(to: &w)
            let cell = String(decoding: w.written, as: UTF8.self)
            w.write(byte: UInt8(ascii: "|"))
            if let tripKind { w.write(tripKind) } else { query.writeCacheKind(to: &w) }
            return (cell, String(decoding: w.written, as: UTF8.self))
        }
    }

    private func writeKey(to w: inout ByteWriter) {
        Self.write(lat, to: &w)
        w.write(byte: UInt8(ascii: ","))
        Self.write(lon, to: &w)
    }

    /// Shortest decimal text of a snapped coordinate (`31.25`, `-0.05`, `121`).
    public static func format(_ v: Double) -> String {
        ByteWriter.text(capacity: maxCoordinateBytes) { write(v, to: &$0) }
    }

    /// The most bytes `write` writes: Swift's longest `Double` (`-2.2250738585072014e-308`).
    static let maxCoordinateBytes = 24

    /// The text of `format`. A snapped coordinate has at most 6 decimals (`snapping` rounds it so),
    /// which are written from its millionths without `Double`'s printing; anything else (a value
    /// that is not such a coordinate, or below 0.0001, which Swift prints as `5e-05`) is written
    /// as Swift prints it, so keys never change.
    static func write(_ v: Double, to w: inout ByteWriter) {
        let millionths = (v * 1_000_000).rounded()
        guard abs(v) < 1e9, abs(v) >= 0.0001 || v == 0, millionths / 1_000_000 == v else {
            w.write(v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : "\(v)")
            return
        }
        var n = Int64(millionths)
        if n < 0 {
            w.write(byte: UInt8(ascii: "-"))
            n = -n
        }
        w.write(digits: UInt64(n / 1_000_000), width: 1)
        var fraction = n % 1_000_000
        guard fraction != 0 else { return }
        w.write(byte: UInt8(ascii: "."))
        var width = 6
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        w.write(digits: UInt64(fraction), width: width)
    }
}
