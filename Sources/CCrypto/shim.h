#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>
#include <string.h>

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

/* HMAC-SHA256 (RFC 2104) with the key's two padded blocks absorbed once: `pads` holds the SHA-256
 * states after (key ^ ipad) and after (key ^ opad), so one MAC of a message under 56 bytes costs
 * two compression rounds (the message's block and the outer hash's) and no allocation. */
typedef struct {
    SHA256_CTX inner;
    SHA256_CTX outer;
} ccrypto_hmac_pads;

static inline int ccrypto_hmac_sha256_pads(const unsigned char *key, size_t count, ccrypto_hmac_pads *pads) {
    unsigned char block[64] = {0}, ipad[64], opad[64];
    int ok = 1;
    if (count > sizeof block) ok = ccrypto_sha256(key, count, block);
    else if (count > 0) memcpy(block, key, count);
    for (size_t i = 0; i < sizeof block; i++) {
        ipad[i] = block[i] ^ 0x36;
        opad[i] = block[i] ^ 0x5c;
    }
    ok = ok && SHA256_Init(&pads->inner) == 1 && SHA256_Update(&pads->inner, ipad, sizeof ipad) == 1 &&
         SHA256_Init(&pads->outer) == 1 && SHA256_Update(&pads->outer, opad, sizeof opad) == 1;
    OPENSSL_cleanse(block, sizeof block);
    OPENSSL_cleanse(ipad, sizeof ipad);
    OPENSSL_cleanse(opad, sizeof opad);
    return ok;
}

static inline int ccrypto_hmac_sha256(const ccrypto_hmac_pads *pads, const void *data, size_t count, unsigned char *out) {
    SHA256_CTX context = pads->inner;
    unsigned char inner[32];
    int ok = SHA256_Update(&context, data, count) == 1 && SHA256_Final(inner, &context) == 1;
    context = pads->outer;
    ok = ok && SHA256_Update(&context, inner, sizeof inner) == 1 && SHA256_Final(out, &context) == 1;
    OPENSSL_cleanse(&context, sizeof context);
    OPENSSL_cleanse(inner, sizeof inner);
    return ok;
}
#pragma clang diagnostic pop
#endif
