#ifndef CSQLITE_SHIM_H
#define CSQLITE_SHIM_H
#include <sqlite3.h>
#include <stdint.h>

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
#endif
