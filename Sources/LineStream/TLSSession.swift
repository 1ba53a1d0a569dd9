#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CTLS
import SystemSupport

/// Why TLS could not be set up, or why a `TLSSession` ended: OpenSSL's failures, with its
/// error queue's text kept.
public enum TLSError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The CA file could not be loaded (missing, unreadable, no PEM certificate in it).
    case trustStoreUnusable(path: String, reason: String)
    /// OpenSSL could not create the context or the session, or refused the server name.
    case setupFailed(String)
    /// The server's certificate did not verify: its chain does not lead to a trusted CA, it
    /// has expired, or it does not name the server (RFC 6125 section 6). `reason` is
    /// `X509_verify_cert_error_string(3)`'s text, "unable to get local issuer certificate".
    case certificateRejected(reason: String)
    /// The handshake failed for another reason: an alert from the server, no common protocol
    /// version (nothing older than TLS 1.2 is offered, RFC 8996), bytes that are not TLS.
    case handshakeFailed(String)
    /// After the handshake, a record did not decrypt or parse, or the server sent an alert.
    case protocolFailure(String)
    /// `seal(_:)` was called before the handshake completed or after `shutdown()`.
    case notEstablished

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .trustStoreUnusable(let path, let reason): "cannot load CA file \(path): \(reason)"
        case .setupFailed(let reason): "TLS setup failed: \(reason)"
        case .certificateRejected(let reason): "server certificate rejected: \(reason)"
        case .handshakeFailed(let reason): "TLS handshake failed: \(reason)"
        case .protocolFailure(let reason): "TLS failure: \(reason)"
        case .notEstablished: "TLS session not established"
        }
    }
}

/// What a client trusts and offers in TLS, shared by all its sessions: an OpenSSL 3
/// `SSL_CTX` (Debian `libssl-dev`) that verifies the server's certificate chain
/// (`SSL_VERIFY_PEER`), offers TLS 1.2 and 1.3 only (RFC 8996 deprecates older ones) and
/// refuses TLS 1.2 renegotiation (`SSL_OP_NO_RENEGOTIATION`).
///
/// Thread-safe: the context is configured once, in `init`, and only read afterwards
/// (OpenSSL allows `SSL_new` on a shared, unmodified `SSL_CTX` from any thread).
public final class TLSContext: Sendable {
    /// The CA file given, or `nil` for the system's default trust store.
    public let caFile: String?
    // Safety: configured in init and never modified after; freed in deinit.
    nonisolated(unsafe) let context: OpaquePointer

    /// Creates a client context.
    ///
    /// - Parameter caFile: a PEM file of the CA certificates to trust; `nil` trusts the
    ///   system's store (`SSL_CTX_set_default_verify_paths`, `/etc/ssl/certs` on Debian).
    /// - Throws: `TLSError.trustStoreUnusable` when the file cannot be loaded,
    ///   `TLSError.setupFailed` when OpenSSL cannot create the context.
    public init(caFile: String? = nil) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .setupFailed(TLSSession.errorQueue()) }
        guard ctls_require_tls12(context) == 1 else {
            SSL_CTX_free(context)
            throw .setupFailed(TLSSession.errorQueue())
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        ctls_refuse_renegotiation(context)
        let loaded = caFile.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
        guard loaded == 1 else {
            SSL_CTX_free(context)
            throw .trustStoreUnusable(path: caFile ?? "(system default)", reason: TLSSession.errorQueue())
        }
        self.caFile = caFile
        self.context = context
    }

    deinit { SSL_CTX_free(context) }
}

/// One TLS client session over memory BIOs: the transport stays the caller's (a
/// `TCPConnection`, an upgraded XMPP stream after STARTTLS, RFC 6120 section 5), and this type
/// only turns bytes into bytes. `start()` gives the ClientHello to send; every chunk read from
/// the socket goes to `receive(_:)`, which returns the plaintext and the bytes to send back;
/// `seal(_:)` encrypts what the app sends once the handshake is done.
///
/// The certificate is checked against the context's CAs and against `serverName`
/// (`SSL_set1_host`: the subjectAltName DNS names, RFC 6125), or against the address when
/// `serverName` is an IP literal; a name is also sent as SNI (RFC 6066 section 3).
///
/// Bounded: OpenSSL holds at most one partial record (16 KiB plus overhead, RFC 8446 section
/// 5.1) between calls; everything decrypted is returned at once.
///
/// Thread-safe: calls are serialized by a lock; use one session for one connection.
public final class TLSSession: Sendable {
    /// What one `receive(_:)` produced.
    public struct Output: Sendable, Equatable {
        /// Decrypted application data, in order.
        public var plaintext: [UInt8] = []
        /// Bytes to send to the peer (handshake messages, alerts), in order.
        public var ciphertext: [UInt8] = []
        /// Whether the handshake completed during this call (true in exactly one call).
        public var handshakeCompleted = false
        /// Whether the peer sent `close_notify` (RFC 8446 section 6.1): no more data follows.
        public var closedByPeer = false
    }

    private struct Handles {
        let ssl: OpaquePointer
        let input: OpaquePointer
        let output: OpaquePointer
        var established = false
        var ended = false
    }

    /// The name (or address) the certificate must match.
    public let serverName: String
    private let context: TLSContext
    private let state: Locked<Handles>

    /// Creates a client session that will verify the server as `serverName`.
    ///
    /// - Parameters:
    ///   - context: what to trust and offer.
    ///   - serverName: a DNS name ("localhost", "xmpp.example.org") or an IP literal.
    /// - Throws: `TLSError.setupFailed` when OpenSSL cannot create the session or refuses the name.
    public init(context: TLSContext, serverName: String) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.context) else { throw .setupFailed(Self.errorQueue()) }
        guard let input = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .setupFailed(Self.errorQueue())
        }
        guard let output = BIO_new(BIO_s_mem()) else {
            BIO_free(input)
            SSL_free(ssl)
            throw .setupFailed(Self.errorQueue())
        }
        // The session owns both BIOs from here on: SSL_free frees them.
        SSL_set_bio(ssl, input, output)
        SSL_set_connect_state(ssl)
        let configured: Bool
        if Self.isAddressLiteral(serverName) {
            configured = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1
        } else {
            configured = ctls_set_server_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
        }
        guard configured else {
            SSL_free(ssl)
            throw .setupFailed("server name \"\(serverName)\" refused: \(Self.errorQueue())")
        }
        self.serverName = serverName
        self.context = context
        state = Locked(Handles(ssl: ssl, input: input, output: output))
    }

    deinit {
        SSL_free(state.withLock { $0.ssl })
    }

    /// Starts the handshake.
    ///
    /// - Returns: the ClientHello, to send to the server.
    /// - Throws: `TLSError.handshakeFailed` when OpenSSL cannot build it.
    public func start() throws(TLSError) -> [UInt8] {
        try state.withLock { handles throws(TLSError) in
            _ = try Self.advanceHandshake(&handles)
            return Self.drain(handles.output)
        }
    }

    /// Takes bytes read from the transport.
    ///
    /// - Parameter ciphertext: the bytes, as read (any split).
    /// - Returns: the plaintext decrypted, the bytes to send back, and whether the handshake
    ///   completed or the peer closed.
    /// - Throws: `TLSError.certificateRejected` or `.handshakeFailed` during the handshake,
    ///   `.protocolFailure` after it. The session is unusable after a throw.
    public func receive(_ ciphertext: [UInt8]) throws(TLSError) -> Output {
        try state.withLock { handles throws(TLSError) in
            var result = Output()
            guard !handles.ended else { return result }
            try Self.write(ciphertext, to: handles.input)
            if !handles.established {
                result.handshakeCompleted = try Self.advanceHandshake(&handles)
            }
            if handles.established {
                result.closedByPeer = try Self.readAll(handles.ssl, into: &result.plaintext)
                if result.closedByPeer { handles.ended = true }
            }
            result.ciphertext = Self.drain(handles.output)
            return result
        }
    }

    /// Encrypts application data.
    ///
    /// - Parameter plaintext: what to send.
    /// - Returns: the TLS records to send to the peer.
    /// - Throws: `TLSError.notEstablished` before the handshake completed or after
    ///   `shutdown()`; `.protocolFailure` when OpenSSL refuses the write.
    public func seal(_ plaintext: [UInt8]) throws(TLSError) -> [UInt8] {
        try state.withLock { handles throws(TLSError) in
            guard handles.established, !handles.ended else { throw .notEstablished }
            ERR_clear_error()
            var offset = 0
            while offset < plaintext.count {
                // At most 1 MiB per SSL_write: its length is an Int32.
                let count = min(plaintext.count - offset, 1 << 20)
                let written = plaintext.withUnsafeBytes { SSL_write(handles.ssl, $0.baseAddress! + offset, Int32(count)) }
                guard written > 0 else { throw .protocolFailure(Self.errorQueue()) }
                offset += Int(written)
            }
            return Self.drain(handles.output)
        }
    }

    /// Ends the session: the `close_notify` alert (RFC 8446 section 6.1) to send before closing
    /// the transport. Later calls return nothing.
    ///
    /// - Returns: the alert's bytes (empty when the handshake never completed or the session
    ///   already ended).
    public func shutdown() -> [UInt8] {
        state.withLock { handles in
            guard handles.established, !handles.ended else { return [] }
            handles.ended = true
            ERR_clear_error()
            _ = SSL_shutdown(handles.ssl)
            return Self.drain(handles.output)
        }
    }

    /// Whether the handshake has completed.
    public var isEstablished: Bool { state.withLock { $0.established } }

    /// The protocol version negotiated, "TLSv1.3"; `nil` before the handshake completed.
    public var protocolVersion: String? {
        state.withLock { $0.established ? SSL_get_version($0.ssl).map { String(cString: $0) } : nil }
    }

    /// The cipher suite negotiated, "TLS_AES_256_GCM_SHA384"; `nil` before the handshake completed.
    public var cipherSuite: String? {
        state.withLock { handles in
            guard handles.established, let cipher = SSL_get_current_cipher(handles.ssl) else { return nil }
            return SSL_CIPHER_get_name(cipher).map { String(cString: $0) }
        }
    }

    // MARK: - OpenSSL calls (under the lock)

    /// Runs `SSL_do_handshake`; returns whether it completed now.
    private static func advanceHandshake(_ handles: inout Handles) throws(TLSError) -> Bool {
        ERR_clear_error()
        let result = SSL_do_handshake(handles.ssl)
        if result == 1 {
            handles.established = true
            return true
        }
        let code = SSL_get_error(handles.ssl, result)
        if code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE { return false }
        handles.ended = true
        let verification = SSL_get_verify_result(handles.ssl)
        if verification != X509_V_OK {
            throw .certificateRejected(reason: X509_verify_cert_error_string(verification).map { String(cString: $0) } ?? "error \(verification)")
        }
        throw .handshakeFailed(errorQueue(code))
    }

    /// Reads every complete record; returns whether the peer sent `close_notify`.
    private static func readAll(_ ssl: OpaquePointer, into plaintext: inout [UInt8]) throws(TLSError) -> Bool {
        let capacity = 16_384
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            ERR_clear_error()
            let count = SSL_read(ssl, buffer, Int32(capacity))
            if count > 0 {
                plaintext += UnsafeRawBufferPointer(start: buffer, count: Int(count))
                continue
            }
            switch SSL_get_error(ssl, count) {
            case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return false
            case SSL_ERROR_ZERO_RETURN: return true
            case let code: throw .protocolFailure(errorQueue(code))
            }
        }
    }

    private static func write(_ bytes: [UInt8], to bio: OpaquePointer) throws(TLSError) {
        var offset = 0
        while offset < bytes.count {
            let count = min(bytes.count - offset, 1 << 20)
            let written = bytes.withUnsafeBytes { BIO_write(bio, $0.baseAddress! + offset, Int32(count)) }
            guard written > 0 else { throw .protocolFailure("memory BIO refused \(count) bytes") }
            offset += Int(written)
        }
    }

    /// Everything OpenSSL wrote for the peer.
    private static func drain(_ bio: OpaquePointer) -> [UInt8] {
        let pending = BIO_ctrl_pending(bio)
        guard pending > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: Int(pending)) { buffer, initialized in
            initialized = max(0, Int(BIO_read(bio, buffer.baseAddress, Int32(pending))))
        }
    }

    /// OpenSSL's error queue as text (emptied), or the `SSL_get_error` code when it is empty.
    static func errorQueue(_ code: Int32? = nil) -> String {
        var messages: [String] = []
        while case let error = ERR_get_error(), error != 0 {
            var text = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(error, &text, text.count)
            messages.append(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
        if messages.isEmpty, let code { return "SSL_get_error \(code)" + (code == SSL_ERROR_SYSCALL ? " (connection cut)" : "") }
        return messages.isEmpty ? "no OpenSSL error" : messages.joined(separator: "; ")
    }

    private static func isAddressLiteral(_ name: String) -> Bool {
        var storage = in6_addr()
        return inet_pton(AF_INET, name, &storage) == 1 || inet_pton(AF_INET6, name, &storage) == 1
    }
}
