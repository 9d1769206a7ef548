#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>
#include <stdint.h>
#include <sys/random.h>  /* getrandom, for the seed of the shared rate table */

/// SQLITE_TRANSIENT is a macro around a cast Swift cannot import; this gives it a name.
static inline sqlite3_destructor_type csqlite_transient(void) { return SQLITE_TRANSIENT; }

/// Atomic access to a counter in memory shared between processes (the `-writer` page).
static inline uint64_t csqlite_atomic_load(const uint64_t *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
static inline void csqlite_atomic_increment(uint64_t *p) { __atomic_add_fetch(p, 1, __ATOMIC_ACQ_REL); }
static inline void csqlite_atomic_store(uint64_t *p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
/// Replaces `expected` with `desired`; false (and nothing written) when `*p` was not `expected`.
static inline _Bool csqlite_atomic_replace(uint64_t *p, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}
/// Locks `m`, waiting at most `seconds` by the monotonic clock: a wall clock stepped back while
/// a worker waits must not stretch the wait (`pthread_mutex_timedlock` counts in CLOCK_REALTIME).
/// `pthread_mutex_clocklock` is glibc 2.30's; declared here because <pthread.h> shows it only
/// to _GNU_SOURCE code. Returns what it returns: 0, ETIMEDOUT, EOWNERDEAD, ...
#include <pthread.h>
#include <time.h>
extern int pthread_mutex_clocklock(pthread_mutex_t *restrict, clockid_t, const struct timespec *restrict);
static inline int csqlite_mutex_lock_within(pthread_mutex_t *m, int seconds) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += seconds;
    return pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &deadline);
}
/// The same, waiting at most `ms` milliseconds.
static inline int csqlite_mutex_lock_within_ms(pthread_mutex_t *m, int ms) {
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += (long)(ms % 1000) * 1000000L;
    deadline.tv_sec += ms / 1000 + deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    return pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &deadline);
}

/* ---- A WAL that is written once per commit (see Database.swift, `WALWrites`) ----------------
 *
 * SQLite writes each WAL frame as two pwrite calls, its 24-byte header and its page: about 21
 * system calls for a session creation's commit, all made while every other writer waits. This
 * VFS wraps the default one and, for WAL files only, gathers consecutive writes in a buffer and
 * writes them with one call when the commit frame's page arrives (a frame header whose "database
 * size after commit" field, bytes 4..7, is not zero), inside that same xWrite, so that an error
 * is still the commit's error and every frame is in the file before SQLite publishes the commit
 * in the wal-index. Anything else on the file (read, sync, truncate, size, lock, file control,
 * close) and any write that does not continue the buffer write it out first. Every other file
 * goes straight to the default VFS's methods.
 *
 * Frames that are never followed by a commit frame would stay in the buffer; they exist only
 * when SQLite spills pages in the middle of a transaction, so connections on this VFS run with
 * `PRAGMA cache_spill=OFF` (Database.swift). */
#include <pthread.h>
#include <string.h>

typedef struct csqlite_wal_file {
    sqlite3_file base;
    sqlite3_file *real;      /* the default VFS's file, in the memory right after this struct */
    unsigned char *buffer;   /* `length` bytes due at offset `start` */
    sqlite3_int64 start;
    int length;
    int commitFollows;       /* the last write was a commit frame's header */
    long writes;             /* writes made to the file (tests count them) */
} csqlite_wal_file;

enum { CSQLITE_WAL_BUFFER = 128 * 1024 };

static sqlite3_vfs *csqlite_wal_default(sqlite3_vfs *vfs) { return (sqlite3_vfs *)vfs->pAppData; }

static int csqlite_wal_write_through(csqlite_wal_file *f, const void *data, int amount, sqlite3_int64 offset) {
    f->writes += 1;
    return f->real->pMethods->xWrite(f->real, data, amount, offset);
}

static int csqlite_wal_flush(csqlite_wal_file *f) {
    if (f->length == 0) return SQLITE_OK;
    int length = f->length;
    f->length = 0;
    return csqlite_wal_write_through(f, f->buffer, length, f->start);
}

static int csqlite_wal_close(sqlite3_file *p) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    int rc2 = f->real->pMethods->xClose(f->real);
    sqlite3_free(f->buffer);
    f->buffer = 0;
    return rc != SQLITE_OK ? rc : rc2;
}

static int csqlite_wal_write(sqlite3_file *p, const void *data, int amount, sqlite3_int64 offset) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int commit = f->commitFollows;
    f->commitFollows = 0;
    if (f->length > 0 && (offset != f->start + f->length || f->length + amount > CSQLITE_WAL_BUFFER)) {
        int rc = csqlite_wal_flush(f);
        if (rc != SQLITE_OK) return rc;
    }
    if (f->buffer == 0) f->buffer = sqlite3_malloc(CSQLITE_WAL_BUFFER);
    if (f->buffer == 0 || amount > CSQLITE_WAL_BUFFER) return csqlite_wal_write_through(f, data, amount, offset);
    if (f->length == 0) f->start = offset;
    memcpy(f->buffer + f->length, data, (size_t)amount);
    f->length += amount;
    if (commit) return csqlite_wal_flush(f);
    const unsigned char *b = data;
    f->commitFollows = amount == 24 && offset >= 32 && (b[4] | b[5] | b[6] | b[7]) != 0;
    return SQLITE_OK;
}

static int csqlite_wal_read(sqlite3_file *p, void *out, int amount, sqlite3_int64 offset) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, amount, offset);
}

static int csqlite_wal_truncate(sqlite3_file *p, sqlite3_int64 size) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int csqlite_wal_sync(sqlite3_file *p, int flags) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int csqlite_wal_size(sqlite3_file *p, sqlite3_int64 *size) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int csqlite_wal_lock(sqlite3_file *p, int level) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xLock(f->real, level);
}

static int csqlite_wal_unlock(sqlite3_file *p, int level) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xUnlock(f->real, level);
}

static int csqlite_wal_reserved(sqlite3_file *p, int *out) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int csqlite_wal_control(sqlite3_file *p, int op, void *arg) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    int rc = csqlite_wal_flush(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int csqlite_wal_sector(sqlite3_file *p) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    return f->real->pMethods->xSectorSize(f->real);
}

static int csqlite_wal_device(sqlite3_file *p) {
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    return f->real->pMethods->xDeviceCharacteristics(f->real);
}

/* Version 1: SQLite maps and locks through the main database file, never through its WAL. */
static const sqlite3_io_methods csqlite_wal_methods = {
    1, csqlite_wal_close, csqlite_wal_read, csqlite_wal_write, csqlite_wal_truncate, csqlite_wal_sync,
    csqlite_wal_size, csqlite_wal_lock, csqlite_wal_unlock, csqlite_wal_reserved, csqlite_wal_control,
    csqlite_wal_sector, csqlite_wal_device,
};

static int csqlite_wal_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *p, int flags, int *outFlags) {
    sqlite3_vfs *real = csqlite_wal_default(vfs);
    if (!(flags & SQLITE_OPEN_WAL)) return real->xOpen(real, name, p, flags, outFlags);
    csqlite_wal_file *f = (csqlite_wal_file *)p;
    memset(f, 0, sizeof *f + (size_t)real->szOsFile);
    f->real = (sqlite3_file *)(f + 1);
    int rc = real->xOpen(real, name, f->real, flags, outFlags);
    /* Without methods SQLite does not call xClose, so a failed open leaves nothing to close. */
    f->base.pMethods = f->real->pMethods ? &csqlite_wal_methods : 0;
    return rc;
}

static int csqlite_wal_delete(sqlite3_vfs *v, const char *n, int s) { return csqlite_wal_default(v)->xDelete(csqlite_wal_default(v), n, s); }
static int csqlite_wal_access(sqlite3_vfs *v, const char *n, int fl, int *o) { return csqlite_wal_default(v)->xAccess(csqlite_wal_default(v), n, fl, o); }
static int csqlite_wal_fullpath(sqlite3_vfs *v, const char *n, int c, char *o) { return csqlite_wal_default(v)->xFullPathname(csqlite_wal_default(v), n, c, o); }
static void *csqlite_wal_dlopen(sqlite3_vfs *v, const char *n) { return csqlite_wal_default(v)->xDlOpen(csqlite_wal_default(v), n); }
static void csqlite_wal_dlerror(sqlite3_vfs *v, int c, char *o) { csqlite_wal_default(v)->xDlError(csqlite_wal_default(v), c, o); }
static void (*csqlite_wal_dlsym(sqlite3_vfs *v, void *h, const char *n))(void) { return csqlite_wal_default(v)->xDlSym(csqlite_wal_default(v), h, n); }
static void csqlite_wal_dlclose(sqlite3_vfs *v, void *h) { csqlite_wal_default(v)->xDlClose(csqlite_wal_default(v), h); }
static int csqlite_wal_random(sqlite3_vfs *v, int c, char *o) { return csqlite_wal_default(v)->xRandomness(csqlite_wal_default(v), c, o); }
static int csqlite_wal_sleep(sqlite3_vfs *v, int us) { return csqlite_wal_default(v)->xSleep(csqlite_wal_default(v), us); }
static int csqlite_wal_time(sqlite3_vfs *v, double *o) { return csqlite_wal_default(v)->xCurrentTime(csqlite_wal_default(v), o); }
static int csqlite_wal_lasterror(sqlite3_vfs *v, int c, char *o) { return csqlite_wal_default(v)->xGetLastError(csqlite_wal_default(v), c, o); }
static int csqlite_wal_time64(sqlite3_vfs *v, sqlite3_int64 *o) { return csqlite_wal_default(v)->xCurrentTimeInt64(csqlite_wal_default(v), o); }

/* The VFS's name, for sqlite3_open_v2. */
static inline const char *csqlite_wal_vfs_name(void) { return "closet-wal"; }

/* The registered VFS and the result of registering it. */
static sqlite3_vfs *csqlite_wal_vfs(void) { static sqlite3_vfs vfs; return &vfs; }
static int *csqlite_wal_registered(void) { static int rc = SQLITE_ERROR; return &rc; }

static void csqlite_wal_register_once(void) {
    sqlite3_vfs *real = sqlite3_vfs_find(0);
    if (real == 0 || real->iVersion < 2) return;
    sqlite3_vfs *vfs = csqlite_wal_vfs();
    vfs->iVersion = 2;
    vfs->szOsFile = (int)sizeof(csqlite_wal_file) + real->szOsFile;
    vfs->mxPathname = real->mxPathname;
    vfs->zName = csqlite_wal_vfs_name();
    vfs->pAppData = real;
    vfs->xOpen = csqlite_wal_open;
    vfs->xDelete = csqlite_wal_delete;
    vfs->xAccess = csqlite_wal_access;
    vfs->xFullPathname = csqlite_wal_fullpath;
    vfs->xDlOpen = csqlite_wal_dlopen;
    vfs->xDlError = csqlite_wal_dlerror;
    vfs->xDlSym = csqlite_wal_dlsym;
    vfs->xDlClose = csqlite_wal_dlclose;
    vfs->xRandomness = csqlite_wal_random;
    vfs->xSleep = csqlite_wal_sleep;
    vfs->xCurrentTime = csqlite_wal_time;
    vfs->xGetLastError = csqlite_wal_lasterror;
    vfs->xCurrentTimeInt64 = csqlite_wal_time64;
    *csqlite_wal_registered() = sqlite3_vfs_register(vfs, 0);
}

/* Registers the VFS (not as the default) once per process, whichever thread asks first;
 * SQLITE_OK when it is registered. */
static inline int csqlite_wal_register(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, csqlite_wal_register_once);
    return *csqlite_wal_registered();
}

/* The writes made to the WAL file of `db` through this VFS, or -1 when its WAL is not open
 * through it (not open yet, or another VFS). */
static inline long csqlite_wal_write_count(sqlite3 *db) {
    sqlite3_file *file = 0;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) != SQLITE_OK || file == 0) return -1;
    return file->pMethods == &csqlite_wal_methods ? ((csqlite_wal_file *)file)->writes : -1;
}
#endif
