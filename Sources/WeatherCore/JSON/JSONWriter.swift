/// A small JSON writer for the gateway's own responses and cached weather bodies: no reflection,
/// no intermediate tree. Numbers are written as Swift prints a `Double`, without a trailing `.0`
/// (`12.5`, `5`, `1e+16`: what `JSONEncoder` wrote before it), except that negative zero is `0`
/// (a provider's `-0.0` shown as "-0 °C" in an app); a number that is not finite (no JSON for it)
/// is written as `null`.
public struct JSONWriter {
    /// What has been written so far.
    public private(set) var bytes: [UInt8] = []
    private var needsComma = false

    /// An empty writer, with room for a typical body.
    public init() { bytes.reserveCapacity(512) }

    /// An object value; `body` writes its fields.
    public mutating func object(_ body: (inout JSONWriter) -> Void) {
        container(UInt8(ascii: "{"), UInt8(ascii: "}"), body)
    }

    /// An object's member name and its colon; the value comes next.
    public mutating func key(_ k: String) {
        separate()
        string(k)
        bytes.append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// A member whose value is a string.
    public mutating func field(_ k: String, _ v: String) {
        key(k)
        string(v)
        needsComma = true
    }

    /// A member whose value is an integer.
    public mutating func field(_ k: String, _ v: Int64) {
        key(k)
        bytes += Array(String(v).utf8)
        needsComma = true
    }

    /// A member whose value is a string, or `null`.
    public mutating func field(_ k: String, _ v: String?) {
        key(k)
        if let v { string(v) } else { null() }
        needsComma = true
    }

    /// A member whose value is a number (as the type comment says), or `null`.
    public mutating func field(_ k: String, _ v: Double?) {
        key(k)
        if let v { number(v) } else { null() }
        needsComma = true
    }

    /// An array value; `body` writes its elements.
    public mutating func array(_ body: (inout JSONWriter) -> Void) {
        container(UInt8(ascii: "["), UInt8(ascii: "]"), body)
    }

    /// A string as the next element of an array.
    public mutating func element(_ s: String) {
        separate()
        string(s)
        needsComma = true
    }

    private mutating func container(_ open: UInt8, _ close: UInt8, _ body: (inout JSONWriter) -> Void) {
        separate()
        bytes.append(open)
        needsComma = false
        body(&self)
        bytes.append(close)
        needsComma = true
    }

    private mutating func null() {
        bytes += [110, 117, 108, 108]
    }

    private mutating func number(_ v: Double) {
        guard v.isFinite else { return null() }
        var text = v == 0 ? "0" : v.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes += text.utf8
    }

    private mutating func separate() {
        if needsComma { bytes.append(UInt8(ascii: ",")) }
    }

    /// Copies runs that need no escape in one piece (a token response's strings are all one run):
    /// byte by byte, writing that response took twice the instructions (24,000 against 11,000).
    private mutating func string(_ s: String) {
        bytes.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { utf8 in
            var start = 0
            for (i, c) in utf8.enumerated() where c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                escape(c)
                start = i + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private mutating func escape(_ c: UInt8) {
        switch c {
        case UInt8(ascii: "\""): bytes += [92, 34]
        case UInt8(ascii: "\\"): bytes += [92, 92]
        default:
            let hex = Array("0123456789abcdef".utf8)
            bytes += [92, UInt8(ascii: "u"), 48, 48, hex[Int(c >> 4)], hex[Int(c & 15)]]
        }
    }
}
