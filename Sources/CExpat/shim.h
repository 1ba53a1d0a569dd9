#ifndef CEXPAT_SHIM_H
#define CEXPAT_SHIM_H

// libexpat 2.5 (Debian libexpat1-dev): the streaming XML parser most XMPP stacks use.
#include <expat.h>

#endif
