// store-engines: the two embedded stores Debian offers for `realtime-server --data` (issue 34,
// build item 3: "SQLite in WAL mode, or LMDB: measure both and say why"), on the work the
// room store gives them, engine against engine with no Swift around either:
//   appends: 20,000 events of about 100 bytes into 10 rooms with history 1,000, each one
//     transaction that keeps the event, trims the room to its count and moves the room's last
//     id (what SQLiteRoomStore.append does for one publish);
//   reads: the newest 1,000 events of one room, oldest first (a resume's read), 20 times.
// SQLite is run as --data runs it (WAL, synchronous=NORMAL) and with synchronous=FULL; LMDB with
// its default (a sync at every commit), MDB_NOMETASYNC (the meta page not synced: a system crash
// may undo the last commit, as WAL with NORMAL may) and MDB_NOSYNC.
// Build and run: scripts/store-engines (cc -O2 … -llmdb -lsqlite3; liblmdb-dev, libsqlite3-dev).
#include <lmdb.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { APPENDS = 20000, ROOMS = 10, HISTORY = 1000, READS = 20 };
static const char *DATA = "{\"n\":100000,\"status\":\"paid\",\"text\":\"an event of a realistic size, about 100 bytes.\"}";

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "store-engines: %s: %s\n", what, why);
    exit(1);
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *name, double append_seconds, double *reads) {
    qsort(reads, READS, sizeof reads[0], compare_doubles);
    printf("| %s | %.0f | %.2f ms |\n", name, APPENDS / append_seconds, reads[READS / 2] * 1000);
    fflush(stdout);
}

// MARK: - SQLite

static void sqlite_check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) die(what, sqlite3_errmsg(db));
}

static void run_sqlite(const char *folder, const char *synchronous) {
    char path[512];
    snprintf(path, sizeof path, "%s/sqlite-%s.db", folder, synchronous);
    sqlite3 *db;
    if (sqlite3_open(path, &db) != SQLITE_OK) die("sqlite3_open", path);
    char setup[1024];
    snprintf(setup, sizeof setup,
             "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;"
             "CREATE TABLE streams(room TEXT PRIMARY KEY, last INTEGER NOT NULL) WITHOUT ROWID;"
             "CREATE TABLE events(room TEXT NOT NULL, id INTEGER NOT NULL, at INTEGER NOT NULL, data TEXT NOT NULL,"
             " PRIMARY KEY(room, id)) WITHOUT ROWID;",
             synchronous);
    sqlite_check(sqlite3_exec(db, setup, NULL, NULL, NULL), db, "setup");
    sqlite3_stmt *begin, *commit, *insert, *trim, *last, *read;
    sqlite_check(sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "COMMIT", -1, &commit, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "INSERT INTO events(room, id, at, data) VALUES (?1, ?2, ?3, ?4)", -1, &insert, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "DELETE FROM events WHERE room = ?1 AND id <= ?2", -1, &trim, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "INSERT OR REPLACE INTO streams(room, last) VALUES (?1, ?2)", -1, &last, NULL), db, "prepare");
    sqlite_check(sqlite3_prepare_v2(db, "SELECT id, at, data FROM events WHERE room = ?1 AND id > ?2 ORDER BY id", -1, &read, NULL), db, "prepare");
    int64_t ids[ROOMS] = {0};
    char room[16];
    double began = now_seconds();
    for (int index = 0; index < APPENDS; index++) {
        int r = index % ROOMS;
        int64_t id = ++ids[r];
        snprintf(room, sizeof room, "room:%d", r);
        sqlite_check(sqlite3_step(begin), db, "begin");
        sqlite3_reset(begin);
        sqlite3_bind_text(insert, 1, room, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(insert, 2, id);
        sqlite3_bind_int64(insert, 3, 1764800000000 + index);
        sqlite3_bind_text(insert, 4, DATA, -1, SQLITE_STATIC);
        sqlite_check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
        sqlite3_bind_text(trim, 1, room, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(trim, 2, id - HISTORY);
        sqlite_check(sqlite3_step(trim), db, "trim");
        sqlite3_reset(trim);
        sqlite3_bind_text(last, 1, room, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(last, 2, id);
        sqlite_check(sqlite3_step(last), db, "last");
        sqlite3_reset(last);
        sqlite_check(sqlite3_step(commit), db, "commit");
        sqlite3_reset(commit);
    }
    double appends = now_seconds() - began;
    double reads[READS];
    for (int round = 0; round < READS; round++) {
        double start = now_seconds();
        sqlite3_bind_text(read, 1, "room:0", -1, SQLITE_STATIC);
        sqlite3_bind_int64(read, 2, ids[0] - HISTORY);
        int rows = 0;
        size_t bytes = 0;
        while (sqlite3_step(read) == SQLITE_ROW) {
            rows++;
            bytes += (size_t)sqlite3_column_bytes(read, 2);
        }
        sqlite3_reset(read);
        reads[round] = now_seconds() - start;
        if (rows != HISTORY || bytes == 0) die("sqlite read", "not 1,000 events");
    }
    char name[128];
    snprintf(name, sizeof name, "SQLite, WAL, synchronous=%s%s", synchronous, strcmp(synchronous, "NORMAL") == 0 ? " (what --data uses)" : "");
    report(name, appends, reads);
    sqlite3_finalize(begin);
    sqlite3_finalize(commit);
    sqlite3_finalize(insert);
    sqlite3_finalize(trim);
    sqlite3_finalize(last);
    sqlite3_finalize(read);
    sqlite3_close(db);
}

// MARK: - LMDB

static void lmdb_check(int rc, const char *what) {
    if (rc != MDB_SUCCESS) die(what, mdb_strerror(rc));
}

// A key: the room's number, then the id, both big-endian, so a cursor walks a room in id order
// (the stream's last id under id 0).
static void event_key(unsigned char key[12], uint32_t room, uint64_t id) {
    for (int i = 0; i < 4; i++) key[i] = (unsigned char)(room >> (24 - 8 * i));
    for (int i = 0; i < 8; i++) key[4 + i] = (unsigned char)(id >> (56 - 8 * i));
}

static void run_lmdb(const char *folder, unsigned int flags, const char *label) {
    char path[512];
    snprintf(path, sizeof path, "%s/lmdb-%x", folder, flags);
    char command[600];
    snprintf(command, sizeof command, "mkdir -p '%s'", path);
    if (system(command) != 0) die("mkdir", path);
    MDB_env *env;
    lmdb_check(mdb_env_create(&env), "mdb_env_create");
    // The map size is fixed in advance (LMDB does not grow its file by itself): 1 GiB here.
    lmdb_check(mdb_env_set_mapsize(env, (size_t)1 << 30), "mdb_env_set_mapsize");
    lmdb_check(mdb_env_open(env, path, flags, 0600), "mdb_env_open");
    MDB_txn *txn;
    MDB_dbi dbi;
    lmdb_check(mdb_txn_begin(env, NULL, 0, &txn), "begin");
    lmdb_check(mdb_dbi_open(txn, NULL, 0, &dbi), "mdb_dbi_open");
    lmdb_check(mdb_txn_commit(txn), "commit");
    uint64_t ids[ROOMS] = {0};
    size_t length = strlen(DATA);
    unsigned char *value = malloc(8 + length);
    if (value == NULL) die("malloc", "no memory");
    memcpy(value + 8, DATA, length);
    double began = now_seconds();
    for (int index = 0; index < APPENDS; index++) {
        uint32_t room = (uint32_t)(index % ROOMS);
        uint64_t id = ++ids[room];
        int64_t at = 1764800000000 + index;
        memcpy(value, &at, 8);
        unsigned char keyBytes[12];
        MDB_val key = {sizeof keyBytes, keyBytes}, data = {8 + length, value};
        lmdb_check(mdb_txn_begin(env, NULL, 0, &txn), "begin");
        event_key(keyBytes, room, id);
        lmdb_check(mdb_put(txn, dbi, &key, &data, 0), "put");
        if (id > HISTORY) {
            // Ids are contiguous: the trim to the count is one delete.
            event_key(keyBytes, room, id - HISTORY);
            lmdb_check(mdb_del(txn, dbi, &key, NULL), "del");
        }
        event_key(keyBytes, room, 0);
        MDB_val lastValue = {sizeof id, &id};
        lmdb_check(mdb_put(txn, dbi, &key, &lastValue, 0), "put last");
        lmdb_check(mdb_txn_commit(txn), "commit");
    }
    double appends = now_seconds() - began;
    double reads[READS];
    for (int round = 0; round < READS; round++) {
        double start = now_seconds();
        MDB_cursor *cursor;
        lmdb_check(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), "begin read");
        lmdb_check(mdb_cursor_open(txn, dbi, &cursor), "cursor");
        unsigned char keyBytes[12];
        event_key(keyBytes, 0, ids[0] - HISTORY + 1);
        MDB_val key = {sizeof keyBytes, keyBytes}, data;
        int rows = 0;
        size_t bytes = 0;
        int rc = mdb_cursor_get(cursor, &key, &data, MDB_SET_RANGE);
        while (rc == MDB_SUCCESS && key.mv_size == 12 && memcmp(key.mv_data, "\0\0\0\0", 4) == 0) {
            rows++;
            bytes += data.mv_size - 8;
            rc = mdb_cursor_get(cursor, &key, &data, MDB_NEXT);
        }
        mdb_cursor_close(cursor);
        mdb_txn_abort(txn);
        reads[round] = now_seconds() - start;
        if (rows != HISTORY || bytes == 0) die("lmdb read", "not 1,000 events");
    }
    report(label, appends, reads);
    free(value);
    mdb_env_close(env);
}

int main(void) {
    char folder[] = "/tmp/store-engines-XXXXXX";
    if (mkdtemp(folder) == NULL) die("mkdtemp", "cannot make a folder");
    printf("| engine | appends a second (20,000 into 10 rooms, history 1,000; one transaction each) | read of 1,000 events, p50 (20 reads) |\n");
    printf("|---|---|---|\n");
    run_sqlite(folder, "NORMAL");
    run_sqlite(folder, "FULL");
    run_lmdb(folder, 0, "LMDB, default (a sync at every commit)");
    run_lmdb(folder, MDB_NOMETASYNC, "LMDB, MDB_NOMETASYNC");
    run_lmdb(folder, MDB_NOSYNC, "LMDB, MDB_NOSYNC");
    char command[600];
    snprintf(command, sizeof command, "rm -rf '%s'", folder);
    return system(command) == 0 ? 0 : 1;
}
