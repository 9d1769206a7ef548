/// The records of one request as `RequestScreen` follows them, apart from the socket (no imports:
/// fuzz/build.sh compiles it into the fuzz target, which checks that any split of the same bytes
/// gives the same verdict).
///
/// One responder request on one id, as web servers send it: `FCGI_BEGIN_REQUEST` (role
/// `FCGI_RESPONDER`), `FCGI_PARAMS` to their empty record, `FCGI_STDIN` to its empty record.
/// libfcgi then reads no record the walk has not seen. Not let in: a record of another id
/// (libfcgi skips it and reads on, past the request the walk followed), of another type
/// (management records, request id 0, which libfcgi answers itself; `FCGI_DATA`; a second
/// begin), another role (libfcgi would serve an authorizer or a filter as a responder), or
/// another protocol version.
struct RecordWalk {
    /// The most bytes of records the screen looks at: a head must be whole within them, and a
    /// body that goes on past them is given to libfcgi only as far as it came
    /// (`RequestScreen.Verdict.headAndBody`; the handler answers 413 by its `Content-Length`).
    /// It holds mod_fcgid's largest head (its parameters stop at about 64 KiB) with the 4 KiB
    /// body the gateway reads; nginx's largest is 4 × 8 KiB of headers. It stays under the send
    /// buffer of a Unix socket (about 200 KB), so a request this long can be whole in the socket
    /// before libfcgi reads any of it, when it is written in pieces of a kilobyte or more (a Unix
    /// socket charges its sender about 766 bytes a write: a request written 100 bytes at a time
    /// fills the buffer at about 28 KB).
    static let limit = 131_072
    /// No name or value length in the params may reach this (see `walkPairs`).
    static let pairLengthLimit = 65_536

    enum Step: Equatable {
        /// Every record so far belongs to the request, which is not whole yet.
        case more
        /// The request is whole: its empty `FCGI_STDIN` record has come.
        case whole
        /// Something other than the one request has come.
        case drop
    }

    /// Bytes of whole records walked so far, from the request's start.
    private(set) var walked = 0
    /// The params' empty record has come.
    private(set) var headWhole = false
    /// Body bytes in the `FCGI_STDIN` records walked so far.
    private(set) var bodyBytes = 0
    private var begun: Int?
    /// Where the walk is in the params' name-value pairs, which may run across records.
    private var lengthBytesLeft = 0
    private var length = 0
    private var readingName = true
    private var nameLength = 0
    private var skip = 0

    /// Walks on through the whole records of `bytes` (everything the request has sent so far, from
    /// its start, so the same bytes again or with more after them). A walk that has said `whole`
    /// or `drop` is not asked again.
    mutating func walk(_ bytes: UnsafeRawBufferPointer) -> Step {
        while bytes.count - walked >= 8 {
            let record = UnsafeRawBufferPointer(rebasing: bytes[walked...])
            let type = record[1]
            let requestID = Int(record[2]) << 8 | Int(record[3])
            let contentLength = Int(record[4]) << 8 | Int(record[5])
            let length = 8 + contentLength + Int(record[6])
            guard record[0] == 1, requestID != 0 else { return .drop }
            if let begun {
                guard requestID == begun, type == 4 || type == 5 else { return .drop }
            } else {
                guard type == 1, contentLength == 8 else { return .drop }
            }
            guard record.count >= length else { return .more }
            switch type {
            case 1:
                // libfcgi reads the begin record's padding, and an empty params record's, as the
                // next record's header (it sets the padding to 0 when it changes the stream's
                // type): padding there would hide a record from this walk.
                guard record[8] == 0, record[9] == 1, record[6] == 0 else { return .drop }  // FCGI_RESPONDER
                begun = requestID
            case 4:
                guard !headWhole else { return .drop }
                if contentLength == 0 {
                    guard record[6] == 0 else { return .drop }
                    headWhole = true  // the params' end
                } else {
                    guard walkPairs(UnsafeRawBufferPointer(rebasing: record[8..<(8 + contentLength)])) else { return .drop }
                }
            default:
                guard headWhole else { return .drop }
                if contentLength == 0 { return .whole }  // the body's end
                bodyBytes += contentLength
            }
            walked += length
        }
        return .more
    }

    /// Follows the name and value lengths of the params' pairs; false for a length of
    /// `pairLengthLimit` or more, which no web server sends. libfcgi adds a name's and a value's length in an `int`: a 4-byte
    /// name length of 1 with a value length of 2^31 − 2 came to a negative size, and its malloc
    /// assertion ended the worker.
    private mutating func walkPairs(_ content: UnsafeRawBufferPointer) -> Bool {
        var i = 0
        while i < content.count {
            if skip > 0 {
                let n = min(skip, content.count - i)
                skip -= n
                i += n
                continue
            }
            let byte = Int(content[i])
            i += 1
            if lengthBytesLeft == 0 && byte & 0x80 != 0 {
                length = byte & 0x7f  // the first of four bytes
                lengthBytesLeft = 3
                continue
            }
            if lengthBytesLeft == 0 {
                length = byte
            } else {
                length = length << 8 | byte
                lengthBytesLeft -= 1
                if lengthBytesLeft > 0 { continue }
            }
            guard length < Self.pairLengthLimit else { return false }
            if readingName {
                nameLength = length
            } else {
                skip = nameLength + length
            }
            readingName.toggle()
        }
        return true
    }
}
