/// A JSON document built in memory and printed once: `--json` output is always one valid document.
/// Object keys keep the order they were written in, so output is stable for diffs and scripts.
indirect enum JSONDocument {
    case object([(String, JSONDocument)])
    case array([JSONDocument])
    case string(String)
    case int(Int64)
    case double(Double)
    case bool(Bool)
    case null

    static func int(_ n: Int) -> JSONDocument { .int(Int64(n)) }

    /// A string, or `null` when absent.
    static func optional(_ s: String?) -> JSONDocument { s.map(JSONDocument.string) ?? .null }

    /// Pretty-printed with two-space indentation and a final newline.
    var rendered: String {
        var out = ""
        write(to: &out, indent: 0)
        return out + "\n"
    }

    private func write(to out: inout String, indent: Int) {
        let pad = String(repeating: "  ", count: indent + 1)
        let closePad = String(repeating: "  ", count: indent)
        switch self {
        case .object(let fields):
            guard !fields.isEmpty else { out += "{}"; return }
            out += "{\n"
            for (i, (key, value)) in fields.enumerated() {
                out += pad
                Self.quote(key, into: &out)
                out += ": "
                value.write(to: &out, indent: indent + 1)
                out += i == fields.count - 1 ? "\n" : ",\n"
            }
            out += closePad + "}"
        case .array(let items):
            guard !items.isEmpty else { out += "[]"; return }
            out += "[\n"
            for (i, value) in items.enumerated() {
                out += pad
                value.write(to: &out, indent: indent + 1)
                out += i == items.count - 1 ? "\n" : ",\n"
            }
            out += closePad + "]"
        case .string(let s): Self.quote(s, into: &out)
        case .int(let n): out += String(n)
        case .double(let d): out += d.isFinite ? "\(d)" : "null"
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        }
    }

    private static func quote(_ s: String, into out: inout String) {
        out += "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = Array("0123456789abcdef")
                out += "\\u00" + String(hex[Int(scalar.value >> 4)]) + String(hex[Int(scalar.value & 15)])
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
