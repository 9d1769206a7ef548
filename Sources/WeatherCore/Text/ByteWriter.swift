/// Writes bytes into a buffer sized beforehand, checking each write against its end.
package struct ByteWriter {
    private let buffer: UnsafeMutableBufferPointer<UInt8>
    package private(set) var count = 0

    package init(_ buffer: UnsafeMutableBufferPointer<UInt8>) { self.buffer = buffer }

    package mutating func write(_ s: String) {
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { write($0) }
        if done == nil { for c in s.utf8 { write(byte: c) } }
    }

    package mutating func write(_ bytes: UnsafeBufferPointer<UInt8>) {
        precondition(bytes.count <= buffer.count - count, "ByteWriter: past the buffer's end")
        guard let from = bytes.baseAddress, let to = buffer.baseAddress else { return }
        (to + count).initialize(from: from, count: bytes.count)
        count += bytes.count
    }

    package mutating func write(byte: UInt8) {
        precondition(count < buffer.count, "ByteWriter: past the buffer's end")
        buffer[count] = byte
        count += 1
    }

    /// `n` in decimal, without making a String.
    package mutating func write(decimal n: Int) {
        if n < 0 { write(byte: UInt8(ascii: "-")) }
        write(digits: UInt64(n.magnitude), width: 1)
    }

    /// How many bytes `write(decimal: n)` writes.
    package static func decimalCount(_ n: Int) -> Int {
        var digits = 1, rest = n.magnitude
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return n < 0 ? digits + 1 : digits
    }

    /// `n` in decimal, zero-padded on the left to `width` digits.
    package mutating func write(digits n: UInt64, width: Int) {
        var power: UInt64 = 1
        var count = 1
        while power <= n / 10 {
            power *= 10
            count += 1
        }
        for _ in count..<max(count, width) { write(byte: UInt8(ascii: "0")) }
        var rest = n
        while power > 0 {
            write(byte: UInt8(ascii: "0") + UInt8(rest / power))
            rest %= power
            power /= 10
        }
    }

    /// The bytes written so far.
    package var written: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: buffer[..<count]) }

    /// What `body` writes into a buffer of `capacity` bytes on the stack, as a string.
    package static func text(capacity: Int, _ body: (inout ByteWriter) -> Void) -> String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: capacity) { buffer in
            var w = ByteWriter(buffer)
            body(&w)
            return String(decoding: w.written, as: UTF8.self)
        }
    }
}
