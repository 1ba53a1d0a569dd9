#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H

// OpenSSL 3 libcrypto: HMAC (HMAC-SHA256 for Pusher-style signatures), EVP digests (MD5 for
// body_md5, SHA-256), constant-time comparison.
#include <openssl/hmac.h>
#include <openssl/evp.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>

#endif
