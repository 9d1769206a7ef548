extension String {
    /// The text without its line feeds and lone carriage returns (a CRLF is one `Character` to
    /// Swift and stays): how a hash key file is read, which must not change (`Bootstrap.hashKey`).
    func replacingNewlines() -> String { String(filter { $0 != "\n" && $0 != "\r" }) }
}
