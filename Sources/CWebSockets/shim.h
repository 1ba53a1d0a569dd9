#ifndef CWEBSOCKETS_SHIM_H
#define CWEBSOCKETS_SHIM_H

#include <libwebsockets.h>

/// LWS_PRE: headroom libwebsockets needs before a payload passed to lws_write. It is a macro
/// expression Swift cannot import.
static inline size_t cws_lws_pre(void) { return LWS_PRE; }

#endif
