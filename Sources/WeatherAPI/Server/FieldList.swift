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
    /// One name with its value, and the name's byte count. One array of these rather than three
    /// parallel arrays: every request builds two lists, and each array was an allocation.
    fileprivate struct Field: Sendable {
        var name: String
        var length: Int
        var value: String
    }
    private var fields: [Field] = []

    public init() {
        fields.reserveCapacity(16)
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
            return fields.withUnsafeBufferPointer { all in
                var i = all.count - 1
                while i >= 0 {
                    if all[i].length == length && all[i].name == name { return all[i].value }
                    i -= 1
                }
                return nil
            }
        }
        set {
            if let i = fields.lastIndex(where: { $0.name == name }) {
                if let newValue {
                    fields[i].value = newValue
                } else {
                    fields.remove(at: i)
                }
            } else if let newValue {
                append(name, newValue)
            }
        }
    }

    /// Adds a parameter without looking for an earlier one of that name (the reader's way in).
    /// The strings are taken over (`consuming`): the caller's copies are not retained again.
    public mutating func append(_ name: consuming String, _ value: consuming String) {
        let length = name.utf8.count
        fields.append(Field(name: name, length: length, value: value))
    }

    public struct Iterator: IteratorProtocol {
        fileprivate var base: IndexingIterator<[Field]>
        public mutating func next() -> (String, String)? {
            guard let field = base.next() else { return nil }
            return (field.name, field.value)
        }
    }

    public func makeIterator() -> Iterator { Iterator(base: fields.makeIterator()) }
}
