/// Bytes to a string, nil unless they are valid UTF-8: what `String(validating:as: UTF8.self)`
/// does, with a fast path for ASCII. The generic validator cost about 800 instructions for a
/// short query value (callgrind, session 6); ASCII, the usual case, needs no validation, and
/// `String(decoding:as:)` copies it after its own word-at-a-time ASCII check.
public func validUTF8String(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
    if bytes.allSatisfy({ $0 < 0x80 }) { return String(decoding: bytes, as: UTF8.self) }
    return String(validating: bytes, as: UTF8.self)
}
