/// A short list of parameter names, matched on raw bytes.
struct ParameterFilter {
    let names: [String]
    private let bytes: [[UInt8]]
    init(_ names: [String]) {
        self.names = names
        bytes = names.map { Array($0.utf8) }
    }

    /// The kept name spelled `name`, the same string for every request instead of one decoded
    /// (and, past 15 bytes, allocated) each time; nil when the parameter is not kept.
    func keptName(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        for (i, b) in bytes.enumerated() where b.count == name.count && b.elementsEqual(name) { return names[i] }
        return nil
    }
}
