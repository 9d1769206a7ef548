#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>

/* SHA-256 through OpenSSL's low-level digest functions. OpenSSL 3 deprecates them in favour of
 * EVP, but they are still part of 3.x and run the same assembly; EVP's first use initialises the
 * provider machinery (configuration, the default provider's algorithm tables), which cost every
 * worker 1.9 MB of RSS, and allocates a context for every digest. See docs/decisions.md. */
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wdeprecated-declarations"
static inline int ccrypto_sha256(const void *data, size_t count, unsigned char *out) {
    SHA256_CTX context;
    return SHA256_Init(&context) == 1 && SHA256_Update(&context, data, count) == 1 &&
           SHA256_Final(out, &context) == 1;
}
#pragma clang diagnostic pop
#endif
