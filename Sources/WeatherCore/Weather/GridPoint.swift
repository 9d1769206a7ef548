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
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        Self.append(lat, to: &bytes)
        bytes.append(UInt8(ascii: ","))
        Self.append(lon, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Shortest decimal text of a snapped coordinate (`31.25`, `-0.05`, `121`).
    public static func format(_ v: Double) -> String {
        var bytes: [UInt8] = []
        append(v, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The text of `format`. A snapped coordinate has at most 6 decimals (`snapping` rounds it so),
    /// which are written from its millionths without `Double`'s printing; anything else (a value
    /// that is not such a coordinate, or below 0.0001, which Swift prints as `5e-05`) is written
    /// as Swift prints it, so keys never change.
    static func append(_ v: Double, to bytes: inout [UInt8]) {
        let millionths = (v * 1_000_000).rounded()
        guard abs(v) < 1e9, abs(v) >= 0.0001 || v == 0, millionths / 1_000_000 == v else {
            bytes += (v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : "\(v)").utf8
            return
        }
        var n = Int64(millionths)
        if n < 0 {
            bytes.append(UInt8(ascii: "-"))
            n = -n
        }
        appendDigits(n / 1_000_000, width: 1, to: &bytes)
        var fraction = n % 1_000_000
        guard fraction != 0 else { return }
        bytes.append(UInt8(ascii: "."))
        var width = 6
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        appendDigits(fraction, width: width, to: &bytes)
    }

    /// The decimal digits of `n >= 0`, zero-padded on the left to `width`, without making a String.
    private static func appendDigits(_ n: Int64, width: Int, to bytes: inout [UInt8]) {
        var power: Int64 = 1
        var count = 1
        while power <= n / 10 {
            power *= 10
            count += 1
        }
        for _ in count..<max(count, width) { bytes.append(UInt8(ascii: "0")) }
        var rest = n
        while power > 0 {
            bytes.append(UInt8(ascii: "0") + UInt8(rest / power))
            rest %= power
            power /= 10
        }
    }
}
