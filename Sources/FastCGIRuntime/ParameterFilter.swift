#if canImport(Glibc)
import Glibc
#endif

/// A short list of parameter names, matched on raw bytes.
struct ParameterFilter {
    let names: [String]
    /// Every name's bytes, one after another, and where each starts and how long it is: one
    /// buffer compared with `memcmp`, where an array per name (each retained as it was looked at
    /// and compared element by element) cost about 1,300 instructions a request (callgrind,
    /// session 29).
    private let joined: [UInt8]
    private let starts: [Int]
    private let lengths: [Int]

    init(_ names: [String]) {
        self.names = names
        var joined: [UInt8] = [], starts: [Int] = [], lengths: [Int] = []
        for name in names {
            starts.append(joined.count)
            lengths.append(name.utf8.count)
            joined.append(contentsOf: name.utf8)
        }
        self.joined = joined
        self.starts = starts
        self.lengths = lengths
    }

    /// The kept name spelled `name`, the same string for every request instead of one decoded
    /// (and, past 15 bytes, allocated) each time; nil when the parameter is not kept.
    func keptName(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        guard !name.isEmpty, let wanted = name.baseAddress else { return names.first { $0.isEmpty } }
        return joined.withUnsafeBufferPointer { all -> String? in
            guard let base = all.baseAddress else { return nil }
            for i in 0..<lengths.count where lengths[i] == name.count && memcmp(base + starts[i], wanted, name.count) == 0 {
                return names[i]
            }
            return nil
        }
    }
}
