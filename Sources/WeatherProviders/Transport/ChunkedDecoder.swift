import WeatherCore

/// Decodes a `Transfer-Encoding: chunked` body as its bytes arrive (RFC 9112, section 7.1).
///
/// Chunk extensions and trailer fields are read and dropped. A size line or trailer section
/// longer than `maxLineBytes`, or a malformed one, is an error rather than a reason to buffer more,
/// and so are more than `maxFramingBytes` of size lines, extensions and trailers in all: the
/// body cap counts data only, and a stream of framing would otherwise never reach it.
struct ChunkedDecoder {
    enum Failure: Error, Equatable {
        case malformed
        case tooLarge
    }

    private enum State {
        case size
        case data(remaining: Int)
        case dataEnd
        case trailer
        case done
    }

    static let maxLineBytes = 4096
    /// Framing a provider sends for a 2 MiB body in 4 KiB chunks is about 4 KiB.
    static let maxFramingBytes = 64 * 1024
    private var framingBytes = 0

    private(set) var body: [UInt8] = []
    private var state = State.size
    private var line: [UInt8] = []
    private let limit: Int

    /// `limit` caps the decoded body.
    init(limit: Int) { self.limit = limit }

    var isComplete: Bool {
        if case .done = state { return true }
        return false
    }

    /// Feeds the next bytes of the body; returns how many were consumed (fewer than given only
    /// once the body is complete: the rest belongs to whatever follows it on the connection).
    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(Failure) -> Int {
        var i = 0
        while i < bytes.count {
            switch state {
            case .done:
                return i
            case .data(let remaining):
                let n = min(remaining, bytes.count - i)
                guard body.count + n <= limit else { throw .tooLarge }
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + n)]))
                i += n
                state = remaining == n ? .dataEnd : .data(remaining: remaining - n)
            case .size, .dataEnd, .trailer:
                let byte = bytes[i]
                i += 1
                framingBytes += 1
                guard framingBytes <= Self.maxFramingBytes else { throw .tooLarge }
                guard byte == 10 else {
                    guard line.count < Self.maxLineBytes else { throw .malformed }
                    line.append(byte)
                    continue
                }
                if line.last == 13 { line.removeLast() }
                try endOfLine()
                line.removeAll(keepingCapacity: true)
            }
        }
        return i
    }

    private mutating func endOfLine() throws(Failure) {
        switch state {
        case .size:
            let hex = line.prefix { $0 != UInt8(ascii: ";") && $0 != 32 && $0 != 9 }
            guard !hex.isEmpty, hex.count <= 8 else { throw .malformed }
            var size = 0
            for digit in hex {
                guard let value = Hex.value(ofDigit: digit) else { throw .malformed }
                size = size * 16 + Int(value)
            }
            guard body.count + size <= limit else { throw .tooLarge }
            state = size == 0 ? .trailer : .data(remaining: size)
        case .dataEnd:
            guard line.isEmpty else { throw .malformed }
            state = .size
        case .trailer:
            if line.isEmpty { state = .done }
        case .data, .done:
            preconditionFailure("lines are only read between chunks")
        }
    }
}
