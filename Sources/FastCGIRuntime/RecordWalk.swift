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
                guard record[8] == 0, record[9] == 1 else { return .drop }  // FCGI_RESPONDER
                begun = requestID
            case 4:
                guard !headWhole else { return .drop }
                if contentLength == 0 { headWhole = true }  // the params' end
            default:
                guard headWhole else { return .drop }
                if contentLength == 0 { return .whole }  // the body's end
                bodyBytes += contentLength
            }
            walked += length
        }
        return .more
    }
}
