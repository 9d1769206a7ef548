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

enum { CHTTP_RESOLVED = 0, CHTTP_RESOLVE_FAILED = -1, CHTTP_RESOLVE_TIMEOUT = -2 };

/* One name lookup, shared by the caller and the thread that runs it; whichever of the two
 * finishes with it last frees it. */
struct chttp_lookup {
    pthread_mutex_t mutex;
    pthread_cond_t finished;
    int done, abandoned, status;
    struct addrinfo *result;
    char host[256], port[8];
};

static inline void chttp_lookup_free(struct chttp_lookup *lookup) {
    if (lookup->result) freeaddrinfo(lookup->result);
    pthread_cond_destroy(&lookup->finished);
    pthread_mutex_destroy(&lookup->mutex);
    free(lookup);
}

static inline void *chttp_lookup_run(void *argument) {
    struct chttp_lookup *lookup = argument;
    struct addrinfo hints = {0}, *result = NULL;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    int status = getaddrinfo(lookup->host, lookup->port, &hints, &result);
    pthread_mutex_lock(&lookup->mutex);
    lookup->status = status;
    lookup->result = result;
    lookup->done = 1;
    int abandoned = lookup->abandoned;
    pthread_cond_signal(&lookup->finished);
    pthread_mutex_unlock(&lookup->mutex);
    if (abandoned) chttp_lookup_free(lookup);
    return NULL;
}

/* Resolves host:port for a TCP connection within timeout_ms. Numeric addresses resolve on the
 * spot. getaddrinfo cannot be given a deadline, so a name is looked up on a detached thread
 * (with every signal blocked) while the caller waits at most timeout_ms; a lookup that outlives
 * its caller finishes on its own and frees itself, as libcurl's threaded resolver does.
 * On CHTTP_RESOLVED, *out must be released with freeaddrinfo. */
static inline int chttp_resolve(const char *host, const char *port, int timeout_ms, struct addrinfo **out) {
    struct addrinfo numeric = {0};
    numeric.ai_socktype = SOCK_STREAM;
    numeric.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(host, port, &numeric, out) == 0) return CHTTP_RESOLVED;
    if (strlen(host) >= 256 || strlen(port) >= 8) return CHTTP_RESOLVE_FAILED;

    struct chttp_lookup *lookup = calloc(1, sizeof *lookup);
    if (!lookup) return CHTTP_RESOLVE_FAILED;
    strcpy(lookup->host, host);
    strcpy(lookup->port, port);
    pthread_condattr_t condattr;
    pthread_condattr_init(&condattr);
    pthread_condattr_setclock(&condattr, CLOCK_MONOTONIC);
    pthread_mutex_init(&lookup->mutex, NULL);
    pthread_cond_init(&lookup->finished, &condattr);
    pthread_condattr_destroy(&condattr);

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
        chttp_lookup_free(lookup);
        return CHTTP_RESOLVE_FAILED;
    }

    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) { end.tv_sec += 1; end.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&lookup->mutex);
    while (!lookup->done && pthread_cond_timedwait(&lookup->finished, &lookup->mutex, &end) != ETIMEDOUT) {}
    if (!lookup->done) {
        lookup->abandoned = 1;
        pthread_mutex_unlock(&lookup->mutex);
        return CHTTP_RESOLVE_TIMEOUT;
    }
    pthread_mutex_unlock(&lookup->mutex);
    int status = lookup->status;
    *out = lookup->result;
    lookup->result = NULL;
    chttp_lookup_free(lookup);
    return status == 0 ? CHTTP_RESOLVED : CHTTP_RESOLVE_FAILED;
}
#endif
