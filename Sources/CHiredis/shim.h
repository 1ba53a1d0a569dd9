#ifndef CHIREDIS_SHIM_H
#define CHIREDIS_SHIM_H

// hiredis 0.14 (Debian libhiredis-dev): the blocking API, binary-safe argv commands.
#include <hiredis/hiredis.h>

#endif
