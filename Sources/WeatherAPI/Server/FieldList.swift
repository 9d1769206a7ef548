/// The parameters of one request (CGI/FastCGI `NAME=value`).
public typealias CGIParameters = FieldList

/// The header fields of one request, by lower-case name (`content-type`, `x-weather-token`).
public typealias HeaderFields = FieldList

/// A few names with their values: a request's parameters or its header fields. A request has a
/// dozen of each that matter, so a linear search of short names beats hashing every name on
/// insert and on every lookup (a dictionary of headers was a tenth of a cached request's
/// instructions); the names' byte counts are kept beside them, so most names are passed over
/// without a string comparison. A name given twice: the last one wins, as in a dictionary.
public struct FieldList: Sendable, ExpressibleByDictionaryLiteral, Sequence {
    private var names: [String] = []
    private var lengths: [Int] = []
    private var values: [String] = []

    public init() {
        names.reserveCapacity(16)
        lengths.reserveCapacity(16)
        values.reserveCapacity(16)
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init()
        for (n, v) in elements { self[n] = v }
    }

    public init(_ dictionary: [String: String]) {
        self.init()
        for (n, v) in dictionary { append(n, v) }
    }

    public subscript(name: String) -> String? {
        get {
            let length = name.utf8.count
            var i = names.count - 1
            while i >= 0 {
                if lengths[i] == length && names[i] == name { return values[i] }
                i -= 1
            }
            return nil
        }
        set {
            if let i = names.lastIndex(of: name) {
                if let newValue {
                    values[i] = newValue
                } else {
                    names.remove(at: i)
                    lengths.remove(at: i)
                    values.remove(at: i)
                }
            } else if let newValue {
                append(name, newValue)
            }
        }
    }

    /// Adds a parameter without looking for an earlier one of that name (the reader's way in).
    public mutating func append(_ name: String, _ value: String) {
        names.append(name)
        lengths.append(name.utf8.count)
        values.append(value)
    }

    public func makeIterator() -> Zip2Sequence<[String], [String]>.Iterator { zip(names, values).makeIterator() }
}
