import Dispatch
import Foundation
import Glibc
import SystemSupport

/// Name resolution for client connections, off the service thread.
///
/// libwebsockets 4.1 resolves a client's host with a blocking `getaddrinfo` inside
/// `lws_client_connect_via_info`, on the service thread (every connection of the context waits
/// behind a slow DNS answer), and a name that does not resolve only makes that call return
/// NULL, with no error to report. Here names are resolved first, by glibc's `getaddrinfo(3)`
/// (`/etc/hosts`, DNS, as `/etc/nsswitch.conf` says), on a few threads of their own; the
/// connection is then started on a numeric address, keeping the name for the `Host` header,
/// TLS's SNI and the certificate check (lws takes those from the `host` it is given).
///
/// Bounded: ``maxPending`` lookups wait at most; past that a lookup fails at once with a
/// reason, and a lookup keeps at most ``maxAddresses`` addresses.
final class HostResolver: Sendable {
    /// What a lookup found.
    enum Outcome: Sendable, Equatable {
        /// Numeric addresses (IPv4 dotted, IPv6 without brackets), in `getaddrinfo`'s order
        /// (RFC 6724 destination address selection, `/etc/gai.conf`).
        case addresses([String])
        /// Why there is none: `gai_strerror(3)`'s text.
        case failure(String)
        /// Not looked up: ``maxPending`` lookups already wait.
        case busy(String)
    }

    /// The one resolver of the process: two threads, 256 lookups waiting at most.
    static let shared = HostResolver(threads: 2, maxPending: 256)

    /// Lookups that may wait for a thread.
    let maxPending: Int
    /// Addresses kept per lookup (the connection tries them in order).
    static let maxAddresses = 8

    private struct Job {
        var host: String
        var completion: @Sendable (Outcome) -> Void
    }

    private let jobs = Locked<[Job]>([])
    private let available = DispatchSemaphore(value: 0)

    /// Starts `threads` lookup threads (they live as long as the process).
    init(threads: Int, maxPending: Int) {
        self.maxPending = maxPending
        for index in 0..<threads {
            let thread = Thread { [self] in serve() }
            thread.name = "websocket.resolver.\(index)"
            thread.start()
        }
    }

    /// Looks `host` up and calls `completion` once, on a resolver thread (or on a Dispatch
    /// queue with `.busy` when ``maxPending`` lookups already wait): never before returning.
    func resolve(_ host: String, completion: @escaping @Sendable (Outcome) -> Void) {
        let accepted = jobs.withLock { jobs in
            guard jobs.count < maxPending else { return false }
            jobs.append(Job(host: host, completion: completion))
            return true
        }
        guard accepted else {
            let reason = "\(maxPending) name lookups are already waiting"
            return DispatchQueue.global().async { completion(.busy(reason)) }
        }
        available.signal()
    }

    private func serve() {
        while true {
            available.wait()
            guard let job = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
            job.completion(Self.lookup(job.host))
        }
    }

    /// `getaddrinfo(host, SOCK_STREAM, AF_UNSPEC)`, each address made numeric with
    /// `getnameinfo(NI_NUMERICHOST)`.
    static func lookup(_ host: String) -> Outcome {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, nil, &hints, &list)
        guard status == 0, let list else {
            return .failure(status == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var addresses: [String] = []
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let current = entry, addresses.count < maxAddresses {
            var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            if getnameinfo(current.pointee.ai_addr, current.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0 {
                let address = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if !addresses.contains(address) { addresses.append(address) }
            }
            entry = current.pointee.ai_next
        }
        return addresses.isEmpty ? .failure("no usable address") : .addresses(addresses)
    }

    /// Whether `host` is an IPv4 or IPv6 literal (nothing to resolve).
    static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
