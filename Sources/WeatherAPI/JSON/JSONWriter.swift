/// A small JSON writer for the gateway's own responses: no reflection, no intermediate tree.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    public init() { bytes.reserveCapacity(512) }

    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(UInt8(ascii: "{"))
        needsComma = false
        body(&self)
        bytes.append(UInt8(ascii: "}"))
        needsComma = true
    }

    public mutating func key(_ k: String) {
        separate()
        string(k)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    public mutating func field(_ k: String, _ v: String) {
        key(k)
        string(v)
        needsComma = true
    }

    public mutating func field(_ k: String, _ v: Int64) {
        key(k)
        bytes += Array(String(v).utf8)
        needsComma = true
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    private mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "\""): bytes += [92, 34]
            case UInt8(ascii: "\\"): bytes += [92, 92]
            case 0..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [92, UInt8(ascii: "u"), 48, 48, hex[Int(c >> 4)], hex[Int(c & 15)]]
            default: bytes.append(c)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }
}
