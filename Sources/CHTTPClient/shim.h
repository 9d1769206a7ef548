#ifndef CHTTPCLIENT_SHIM_H
#define CHTTPCLIENT_SHIM_H
/* What the provider transport needs from libssl, zlib and glibc's asynchronous resolver.
 * The functions below exist because Swift cannot call the C macros and variadic functions they
 * wrap, or because a name lookup must be given a deadline (see chttp_resolve). */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <zlib.h>

static inline long chttp_ssl_set_sni(SSL *ssl, const char *host) { return SSL_set_tlsext_host_name(ssl, host); }
static inline long chttp_ctx_min_tls12(SSL_CTX *ctx) { return SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }
/* A peer closing without close_notify ends the stream (close-delimited bodies); no TLS compression. */
static inline uint64_t chttp_ctx_set_options(SSL_CTX *ctx) {
    return SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_COMPRESSION);
}
/* 15 + 32: a gzip or zlib stream, told apart by its header. */
static inline int chttp_inflate_init(z_stream *s) { return inflateInit2(s, 15 + 32); }

enum { CHTTP_RESOLVED = 0, CHTTP_RESOLVE_FAILED = -1, CHTTP_RESOLVE_TIMEOUT = -2, CHTTP_RESOLVE_BUSY = -3 };

/* How many name lookups may run at once in one process. A worker is single-threaded and asks
 * for at most two provider names, so the slots are only ever full when lookups outlive their
 * callers (a resolver that does not answer). */
#define CHTTP_LOOKUP_SLOTS 4

typedef int (*chttp_lookup_function)(const char *host, const char *port, const struct addrinfo *hints,
                                     struct addrinfo **result);

/* One name lookup. The thread that runs it owns it until it is done; then whoever waits for it
 * takes the answer and frees it, or, when nobody waits any more, the thread frees it. */
struct chttp_lookup {
    struct chttp_resolver *resolver;
    int done, status, waiting;
    struct addrinfo *result;
    char host[256], port[8];
};

/* The lookups of one process (HTTPConnection keeps one). Every field is guarded by mutex;
 * `finished` is signalled on CLOCK_MONOTONIC whenever a lookup ends. `lookup` is getaddrinfo
 * unless a test gives another function. `started` counts lookup threads ever started. */
struct chttp_resolver {
    pthread_mutex_t mutex;
    pthread_cond_t finished;
    chttp_lookup_function lookup;
    struct chttp_lookup *running[CHTTP_LOOKUP_SLOTS];
    long started;
};

static inline struct chttp_resolver *chttp_resolver_new(chttp_lookup_function lookup) {
    struct chttp_resolver *resolver = calloc(1, sizeof *resolver);
    if (!resolver) return NULL;
    pthread_condattr_t condattr;
    pthread_condattr_init(&condattr);
    pthread_condattr_setclock(&condattr, CLOCK_MONOTONIC);
    pthread_mutex_init(&resolver->mutex, NULL);
    pthread_cond_init(&resolver->finished, &condattr);
    pthread_condattr_destroy(&condattr);
    resolver->lookup = lookup ? lookup : getaddrinfo;
    return resolver;
}

/* Lookups running now (all of them, or those a caller waits for), and lookup threads started
 * so far: for tests and diagnostics. */
static inline int chttp_resolver_running(struct chttp_resolver *resolver, int waited_for_only) {
    pthread_mutex_lock(&resolver->mutex);
    int count = 0;
    for (int i = 0; i < CHTTP_LOOKUP_SLOTS; i++)
        count += resolver->running[i] != NULL && (!waited_for_only || resolver->running[i]->waiting);
    pthread_mutex_unlock(&resolver->mutex);
    return count;
}

static inline long chttp_resolver_started(struct chttp_resolver *resolver) {
    pthread_mutex_lock(&resolver->mutex);
    long started = resolver->started;
    pthread_mutex_unlock(&resolver->mutex);
    return started;
}

static inline void *chttp_lookup_run(void *argument) {
    struct chttp_lookup *lookup = argument;
    struct chttp_resolver *resolver = lookup->resolver;
    struct addrinfo hints = {0}, *result = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int status = resolver->lookup(lookup->host, lookup->port, &hints, &result);
    pthread_mutex_lock(&resolver->mutex);
    for (int i = 0; i < CHTTP_LOOKUP_SLOTS; i++)
        if (resolver->running[i] == lookup) resolver->running[i] = NULL;
    lookup->status = status;
    lookup->result = result;
    lookup->done = 1;
    int orphaned = lookup->waiting == 0;
    pthread_cond_broadcast(&resolver->finished);
    pthread_mutex_unlock(&resolver->mutex);
    if (orphaned) {
        if (result) freeaddrinfo(result);
        free(lookup);
    }
    return NULL;
}

/* Resolves host:port for a TCP connection within timeout_ms. Numeric addresses resolve on the
 * spot. getaddrinfo cannot be given a deadline, so a name is looked up on a detached thread
 * (with every signal blocked) while the caller waits at most timeout_ms; a lookup that outlives
 * its caller goes on and frees itself, as libcurl's threaded resolver does. A caller asking for
 * a name whose lookup is still running waits for that one instead of starting another, so a
 * resolver that does not answer costs one thread per name, not one per request; when
 * CHTTP_LOOKUP_SLOTS lookups are running already, the answer is CHTTP_RESOLVE_BUSY at once.
 * On CHTTP_RESOLVED, *out must be released with freeaddrinfo. */
static inline int chttp_resolve(struct chttp_resolver *resolver, const char *host, const char *port,
                                int timeout_ms, struct addrinfo **out) {
    struct addrinfo numeric = {0};
    numeric.ai_socktype = SOCK_STREAM;
    numeric.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, port, &numeric, out) == 0) return CHTTP_RESOLVED;
    if (strlen(host) >= 256 || strlen(port) >= 8) return CHTTP_RESOLVE_FAILED;

    pthread_mutex_lock(&resolver->mutex);
    struct chttp_lookup *lookup = NULL;
    int free_slot = -1;
    for (int i = 0; i < CHTTP_LOOKUP_SLOTS; i++) {
        struct chttp_lookup *running = resolver->running[i];
        if (!running) { if (free_slot < 0) free_slot = i; continue; }
        if (!lookup && running->waiting == 0 && strcmp(running->host, host) == 0 && strcmp(running->port, port) == 0)
            lookup = running;
    }
    if (!lookup) {
        if (free_slot < 0) { pthread_mutex_unlock(&resolver->mutex); return CHTTP_RESOLVE_BUSY; }
        lookup = calloc(1, sizeof *lookup);
        if (!lookup) { pthread_mutex_unlock(&resolver->mutex); return CHTTP_RESOLVE_FAILED; }
        lookup->resolver = resolver;
        strcpy(lookup->host, host);
        strcpy(lookup->port, port);

        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_attr_setstacksize(&attr, 256 * 1024);
        sigset_t all, previous;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &previous);
        pthread_t thread;
        int created = pthread_create(&thread, &attr, chttp_lookup_run, lookup);
        pthread_sigmask(SIG_SETMASK, &previous, NULL);
        pthread_attr_destroy(&attr);
        if (created != 0) {
            pthread_mutex_unlock(&resolver->mutex);
            free(lookup);
            return CHTTP_RESOLVE_FAILED;
        }
        resolver->running[free_slot] = lookup;
        resolver->started += 1;
    }
    lookup->waiting = 1;

    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) { end.tv_sec += 1; end.tv_nsec -= 1000000000L; }
    while (!lookup->done && pthread_cond_timedwait(&resolver->finished, &resolver->mutex, &end) != ETIMEDOUT) {}
    if (!lookup->done) {
        lookup->waiting = 0;
        pthread_mutex_unlock(&resolver->mutex);
        return CHTTP_RESOLVE_TIMEOUT;
    }
    pthread_mutex_unlock(&resolver->mutex);
    int status = lookup->status;
    *out = lookup->result;
    free(lookup);
    if (status != 0) {
        if (*out) freeaddrinfo(*out);
        *out = NULL;
        return CHTTP_RESOLVE_FAILED;
    }
    return CHTTP_RESOLVED;
}
#endif
