/* The floor of the write path: c-hello's do-nothing libfcgi responder
 * (../shared/bench/peers/c-hello/hello.c) that, for each request, reads the body and writes what a
 * session creation writes (one session row, an access and a refresh token row) into a database
 * with the gateway's schema (the files in migrations/), with the gateway's durability settings
 * (WAL, synchronous=NORMAL). No parsing, no hashing, no validation: ids and hashes are random hex
 * from a xorshift generator. It answers a 201 with FLOOR_WRITE_BYTES (default 400) bytes of JSON,
 * the size of the gateway's creation response, after its rows are committed.
 *
 * FLOOR_WRITE_KIND=refresh writes what a refresh writes instead: it finds the refresh token it
 * issued last by its hash (outside the transaction, as the gateway does), marks it spent by rowid
 * and inserts the session's next access and refresh token rows (its first request creates the
 * session it refreshes from then on). Only with one thread.
 *
 * FLOOR_WRITE_THREADS=1 (the default) is the gateway's process model: one thread, one connection,
 * one transaction per request. With N > 1, N threads accept requests and share the process's one
 * connection through group commit: a request's rows join the batch that is open; the first thread
 * to find no commit running writes every batched request's rows in one transaction, and each
 * request is answered once the transaction holding its rows has committed.
 *
 * Not a target. It says how fast SQLite on this machine lets a FastCGI worker create sessions,
 * with the gateway's process model and with group commit, so that the gateway's creation rate can
 * be read against what the process model allows rather than against the do-nothing floor alone.
 *
 * Build: cc -O2 -pthread -o floor-write floor-write.c -lfcgi -lsqlite3
 * Run:   FLOOR_WRITE_DB=PATH spawn-fcgi -s SOCK -F N -- ./floor-write   (PATH already migrated) */
#include <fcgiapp.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { MAX_THREADS = 64 };

/* One request's rows. */
struct rows {
    char id[32], installation[72], row[2][32], hash[2][72], now[32], later[32];
    long batch;
    int rc; /* the result of the transaction that held these rows */
};

static sqlite3 *db;
static sqlite3_stmt *begin, *commit, *rollback, *session, *token, *find, *spend;
static int refresh_kind;
static char answer[4001];
static int answer_length;

/* Group commit, guarded by `lock`. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t committed = PTHREAD_COND_INITIALIZER;
static struct rows *pending[MAX_THREADS];
static int pending_count, committing;
static long open_batch = 1, done_batch;

static void fail(const char *what) {
    fprintf(stderr, "floor-write: %s: %s\n", what, db ? sqlite3_errmsg(db) : "?");
    exit(1);
}

/* n random lowercase hex digits after prefix, NUL-terminated. */
static void hex(uint64_t *state, char *out, const char *prefix, int n) {
    static const char digits[] = "0123456789abcdef";
    size_t p = strlen(prefix);
    memcpy(out, prefix, p);
    for (int i = 0; i < n; i += 16) {
        uint64_t r = *state;
        r ^= r << 13;
        r ^= r >> 7;
        r ^= r << 17;
        *state = r;
        for (int j = 0; j < 16 && i + j < n; j++, r >>= 4) out[p + i + j] = digits[r & 15];
    }
    out[p + n] = 0;
}

static int run(sqlite3_stmt *s) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    return rc == SQLITE_DONE ? 0 : rc;
}

/* The access and refresh token rows of r's session. */
static int insert_pair(const struct rows *r) {
    int rc = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        sqlite3_bind_text(token, 1, r->row[k], -1, SQLITE_STATIC);
        sqlite3_bind_text(token, 2, r->id, -1, SQLITE_STATIC);
        sqlite3_bind_text(token, 3, r->hash[k], -1, SQLITE_STATIC);
        sqlite3_bind_text(token, 4, k ? "refresh" : "access", -1, SQLITE_STATIC);
        sqlite3_bind_text(token, 5, r->later, -1, SQLITE_STATIC);
        sqlite3_bind_text(token, 6, r->now, -1, SQLITE_STATIC);
        rc = run(token);
    }
    return rc;
}

/* A new session and its pair. */
static int insert(const struct rows *r) {
    sqlite3_bind_text(session, 1, r->id, -1, SQLITE_STATIC);
    sqlite3_bind_text(session, 2, r->installation, -1, SQLITE_STATIC);
    sqlite3_bind_text(session, 3, r->now, -1, SQLITE_STATIC);
    int rc = run(session);
    return rc ? rc : insert_pair(r);
}

/* One transaction for `count` requests' rows; 0 when it committed. */
static int write_batch(struct rows **batch, int count) {
    int rc = run(begin);
    for (int i = 0; i < count && !rc; i++) rc = insert(batch[i]);
    if (!rc) rc = run(commit);
    if (rc) run(rollback);
    return rc;
}

/* Refresh: spends the refresh token r->hash[1] names (kept from the last request), then inserts
 * r's new pair for session r->id. The first call, with no token yet, creates the session. */
static int rotate(struct rows *r, const char *spent_hash) {
    if (!spent_hash[0]) return write_batch(&r, 1);
    sqlite3_bind_text(find, 1, spent_hash, -1, SQLITE_STATIC);
    int rc = sqlite3_step(find);
    sqlite3_int64 rowid = rc == SQLITE_ROW ? sqlite3_column_int64(find, 0) : -1;
    sqlite3_reset(find);
    if (rowid < 0) return SQLITE_NOTFOUND;
    rc = run(begin);
    if (!rc) {
        sqlite3_bind_int64(spend, 1, rowid);
        sqlite3_bind_text(spend, 2, r->now, -1, SQLITE_STATIC);
        rc = run(spend);
    }
    if (!rc) rc = insert_pair(r);
    if (!rc) rc = run(commit);
    if (rc) run(rollback);
    return rc;
}

/* Returns once r's rows are committed (0) or their transaction failed. */
static int submit(struct rows *r) {
    pthread_mutex_lock(&lock);
    r->batch = open_batch;
    pending[pending_count++] = r;
    while (done_batch < r->batch) {
        if (committing) {
            pthread_cond_wait(&committed, &lock);
            continue;
        }
        struct rows *batch[MAX_THREADS];
        int count = pending_count;
        long number = open_batch++;
        memcpy(batch, pending, sizeof batch[0] * count);
        pending_count = 0;
        committing = 1;
        pthread_mutex_unlock(&lock);
        int rc = write_batch(batch, count);
        pthread_mutex_lock(&lock);
        for (int i = 0; i < count; i++) batch[i]->rc = rc;
        done_batch = number;
        committing = 0;
        pthread_cond_broadcast(&committed);
    }
    pthread_mutex_unlock(&lock);
    return r->rc;
}

static void *serve(void *unused) {
    (void)unused;
    uint64_t state = ((uint64_t)getpid() << 32) ^ (uint64_t)time(0) ^ (uint64_t)(uintptr_t)&state ^ 0x9e3779b97f4a7c15ULL;
    char body[4096], spent_hash[72] = "";
    struct rows r;
    FCGX_Request req;
    FCGX_InitRequest(&req, 0, 0);
    while (FCGX_Accept_r(&req) >= 0) {
        while (FCGX_GetStr(body, sizeof body, req.in) > 0) {}
        time_t t = time(0);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(r.now, sizeof r.now, "%Y-%m-%dT%H:%M:%SZ", &tm);
        t += 900;
        gmtime_r(&t, &tm);
        strftime(r.later, sizeof r.later, "%Y-%m-%dT%H:%M:%SZ", &tm);
        if (!refresh_kind || !spent_hash[0]) {
            hex(&state, r.id, "aws_", 18);
            hex(&state, r.installation, "", 64);
        }
        for (int k = 0; k < 2; k++) {
            hex(&state, r.row[k], "wst_", 24);
            hex(&state, r.hash[k], "", 64);
        }
        int rc = refresh_kind ? rotate(&r, spent_hash) : submit(&r);
        if (refresh_kind) strcpy(spent_hash, rc ? "" : r.hash[1]);
        if (rc) {
            FCGX_PutS("Status: 503 Service Unavailable\r\nContent-Type: application/json\r\n\r\n{\"error\":\"busy\"}", req.out);
        } else {
            FCGX_FPrintF(req.out, "Status: 201 Created\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                                  "Content-Length: %d\r\n\r\n", answer_length);
            FCGX_PutStr(answer, answer_length, req.out);
        }
        FCGX_Finish_r(&req);
    }
    return 0;
}

int main(void) {
    const char *path = getenv("FLOOR_WRITE_DB");
    if (!path) fail("FLOOR_WRITE_DB is not set");
    const char *size = getenv("FLOOR_WRITE_BYTES");
    answer_length = size ? atoi(size) : 400;
    if (answer_length < 16 || answer_length > 4000) answer_length = 400;
    memset(answer, 'x', answer_length);
    memcpy(answer, "{\"x\":\"", 6);
    memcpy(answer + answer_length - 2, "\"}", 2);
    const char *n = getenv("FLOOR_WRITE_THREADS");
    int threads = n ? atoi(n) : 1;
    if (threads < 1 || threads > MAX_THREADS) threads = 1;
    const char *kind = getenv("FLOOR_WRITE_KIND");
    refresh_kind = kind && !strcmp(kind, "refresh");
    if (refresh_kind && threads != 1) fail("FLOOR_WRITE_KIND=refresh takes one thread");

    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX, 0) != SQLITE_OK) fail("open");
    sqlite3_busy_timeout(db, 5000);
    if (sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;"
                         "PRAGMA cache_size=-512; PRAGMA wal_autocheckpoint=4000", 0, 0, 0) != SQLITE_OK)
        fail("pragmas");
    if (sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, 0) ||
        sqlite3_prepare_v2(db, "COMMIT", -1, &commit, 0) ||
        sqlite3_prepare_v2(db, "ROLLBACK", -1, &rollback, 0) ||
        sqlite3_prepare_v2(db, "INSERT INTO anonymous_weather_sessions(id, installation_id_hash, platform, app_version,"
                               " status, created_at, last_seen_at) VALUES (?1, ?2, 'ios', '1.0', 'active', ?3, ?3)", -1, &session, 0) ||
        sqlite3_prepare_v2(db, "INSERT INTO weather_session_tokens(id, session_id, token_hash, token_type, expires_at,"
                               " created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", -1, &token, 0) ||
        sqlite3_prepare_v2(db, "SELECT rowid FROM weather_session_tokens WHERE token_hash = ?1", -1, &find, 0) ||
        sqlite3_prepare_v2(db, "UPDATE weather_session_tokens SET revoked_at = ?2 WHERE rowid = ?1 AND revoked_at IS NULL", -1, &spend, 0))
        fail("prepare");

    FCGX_Init();
    pthread_t others[MAX_THREADS];
    for (int i = 1; i < threads; i++)
        if (pthread_create(&others[i], 0, serve, 0)) fail("pthread_create");
    serve(0);
    return 0;
}
