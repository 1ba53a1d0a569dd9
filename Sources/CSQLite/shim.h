#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H

// SQLite 3 (Debian libsqlite3-dev): the embedded store behind `realtime-server --data DIR`.
#include <sqlite3.h>

#endif
