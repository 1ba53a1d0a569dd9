#ifndef CSODIUM_SHIM_H
#define CSODIUM_SHIM_H

// libsodium: crypto_secretbox (XSalsa20-Poly1305) for end-to-end encrypted channels, as
// Pusher's private-encrypted channels use it.
#include <sodium.h>

#endif
