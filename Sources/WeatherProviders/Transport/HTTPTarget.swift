import WeatherCore

/// The parts of an `http` or `https` URL a GET needs. The URL is read by `HTTPURL.parse`, the
/// reader the configuration checks the providers' base URLs with, so a base URL start-up accepts
/// is one this client fetches, and anything else (other schemes, user info, a missing host, a
/// port out of range, spaces or control characters) is refused here too: a crafted base URL
/// cannot reach a file or another protocol, or split the request line.
struct HTTPTarget: Equatable, Sendable {
    var tls: Bool
    /// The host as written, without the brackets of an IPv6 literal.
    var host: String
    var port: Int
    /// What goes after `GET `: the path and the query, `/` when the URL has neither.
    var requestTarget: String

    /// Where a kept-alive connection may be reused: scheme, host and port.
    var origin: String { "\(tls ? "https" : "http")://\(hostHeader)" }

    /// The `Host` header: the port only when it is not the scheme's default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (tls ? 443 : 80) ? name : "\(name):\(port)"
    }

    init(_ url: HTTPURL) {
        tls = url.tls
        host = url.host
        port = url.port
        requestTarget = (url.path.isEmpty ? "/" : url.path) + (url.query.map { "?\($0)" } ?? "")
    }

    /// The target of `url`, or nil when `HTTPURL.parse` refuses it (why is not kept: the
    /// transport's error never carries anything of a URL, which holds a key).
    init?(_ url: String) {
        do {
            self.init(try HTTPURL.parse(url))
        } catch {
            return nil
        }
    }
}
