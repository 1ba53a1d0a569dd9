#ifndef CTLS_SHIM_H
#define CTLS_SHIM_H

// OpenSSL 3 libssl (Debian libssl-dev): TLS client sessions over memory BIOs for LineStream's
// TLSSession. The functions below wrap macros Swift cannot import.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

/// SSL_set_tlsext_host_name: the Server Name Indication sent in the ClientHello (RFC 6066 section 3).
static inline int ctls_set_server_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

/// SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION): nothing older than TLS 1.2 (RFC 8996).
static inline int ctls_require_tls12(SSL_CTX *ctx) {
    return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
}

/// SSL_OP_NO_RENEGOTIATION: a TLS 1.2 server's renegotiation requests are refused (each one
/// costs a handshake; a hostile server could ask for them without end).
static inline void ctls_refuse_renegotiation(SSL_CTX *ctx) {
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
}

#endif
