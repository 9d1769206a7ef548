import CHTTPClient
#if canImport(Glibc)
import Glibc
#endif

/// The client side of TLS, set up once per transport on its first `https` call: TLS 1.2 or later,
/// the peer's certificate verified against the system's certificate authorities.
final class TLSClientContext {
    let context: OpaquePointer

    /// `caFile` replaces the system's authorities (tests trust their own certificate with it).
    init(caFile: String?) throws(ProviderFailure) {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .transport }
        self.context = context
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        guard chttp_ctx_min_tls12(context) == 1 else { throw .transport }
        _ = chttp_ctx_set_options(context)
        let loaded: Int32
        if let caFile {
            loaded = SSL_CTX_load_verify_locations(context, caFile, nil)
        } else if let directory = Self.hashedDirectory {
            loaded = SSL_CTX_load_verify_locations(context, nil, directory)
        } else if let bundle = Self.caBundle {
            loaded = SSL_CTX_load_verify_locations(context, bundle, nil)
        } else {
            loaded = SSL_CTX_set_default_verify_paths(context)
        }
        ERR_clear_error()
        guard loaded == 1 else { throw .transport }
    }

    deinit { SSL_CTX_free(context) }

    /// A folder of certificates named by subject hash (`update-ca-certificates` and `c_rehash`
    /// make one). Preferred over a bundle: OpenSSL then loads only the authorities a handshake
    /// needs, instead of parsing all ~140 of the bundle into every worker's memory.
    static let hashedDirectory: String? = ["/etc/ssl/certs", "/etc/pki/tls/certs"].first(where: hasHashedNames)

    /// The first CA bundle that exists among the usual distribution paths. The release bundle
    /// ships Debian's libssl, whose built-in paths exist only on Debian and its derivatives.
    static let caBundle: String? = [
        "/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Alpine
        "/etc/pki/tls/certs/ca-bundle.crt",  // Fedora, RHEL, CentOS, CloudLinux
        "/etc/ssl/ca-bundle.pem",  // openSUSE
        "/etc/pki/tls/cacert.pem",  // OpenELEC
        "/etc/ssl/cert.pem",  // Alpine, macOS-style
    ].first { access($0, R_OK) == 0 }

    private static func hasHashedNames(_ path: String) -> Bool {
        guard let directory = opendir(path) else { return false }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            let utf8 = Array(name.utf8)
            if utf8.count == 10, utf8[8] == UInt8(ascii: "."), utf8[9] == UInt8(ascii: "0"),
                utf8[0..<8].allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 >= 97 && $0 <= 102) })
            {
                return true
            }
        }
        return false
    }
}
