/* fuzz_basic_auth.c -- Basic-auth decoding (admit.c; docs/api.md §2): each input, cut at its
 * first NUL as a header value is, read as an Authorization value by admit_basic_key and as
 * base64 by base64_decode_strict; and, when it has no ':', used as a secret key that is encoded
 * the way a client sends it and read back. Asserts, beyond no crash, no undefined behaviour and
 * no leak:
 *   - an accepted header yields a key without ':' or NUL, and that key sent again as
 *     "Basic base64(key:)" is read back the same; a refused one yields no key;
 *   - any key a client can send (no ':', no NUL) survives "Basic base64(key:password)" with any
 *     case of "Basic" and spaces around the credentials;
 *   - base64 that decodes gives exactly floor(6n/8) bytes for n characters before the padding. */
#define _DEFAULT_SOURCE
#include <stdbool.h>

#include "admit.h"
#include "fuzz.h"

/* Standard base64 with '=' padding of s[0, n), NUL-terminated (caller frees). */
static char *b64(const char *s, size_t n)
{
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        abort();
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)(unsigned char)s[i + 1] << 8;
        if (i + 2 < n)
            v |= (unsigned char)s[i + 2];
        *o++ = A[v >> 18 & 63];
        *o++ = A[v >> 12 & 63];
        *o++ = i + 1 < n ? A[v >> 6 & 63] : '=';
        *o++ = i + 2 < n ? A[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* "<scheme> <base64(key:password)><trail>" through admit_basic_key: the key read back. */
static char *send_key(const char *scheme, const char *key, const char *password,
                      const char *trail)
{
    size_t kl = strlen(key), pl = strlen(password);
    char *cred = malloc(kl + pl + 2);
    if (!cred)
        abort();
    memcpy(cred, key, kl);
    cred[kl] = ':';
    memcpy(cred + kl + 1, password, pl + 1);
    char *enc = b64(cred, kl + pl + 1);
    size_t hl = strlen(scheme) + strlen(enc) + strlen(trail) + 3;
    char *h = malloc(hl);
    if (!h)
        abort();
    snprintf(h, hl, "%s  %s%s", scheme, enc, trail);
    char *back = NULL;
    enum basic_auth rc = admit_basic_key(h, &back);
    FUZZ_CHECK(rc == BASIC_AUTH_OK && back != NULL, "a key a client sends is read");
    free(h);
    free(enc);
    free(cred);
    return back;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = fuzz_cstr(data, size);

    char *key = NULL;
    enum basic_auth rc = admit_basic_key(in, &key);
    FUZZ_CHECK(rc == BASIC_AUTH_OK || rc == BASIC_AUTH_FORMAT, "OK or a format error");
    FUZZ_CHECK((rc == BASIC_AUTH_OK) == (key != NULL), "a key exactly when accepted");
    if (key) {
        FUZZ_CHECK(strchr(key, ':') == NULL, "the key stops at the first ':'");
        char *back = send_key("Basic", key, "", "");
        FUZZ_CHECK(strcmp(back, key) == 0, "an accepted key, sent again, reads the same");
        free(back);
        free(key);
    }

    if (!strchr(in, ':')) {
        char *back = send_key("bAsIc", in, "secret:with:colons", " \t");
        FUZZ_CHECK(strcmp(back, in) == 0, "any key survives its encoding");
        free(back);
    }

    size_t len = 0, n = strlen(in);
    char *dec = base64_decode_strict(in, &len);
    if (dec) {
        while (n > 0 && in[n - 1] == '=')
            n--;
        FUZZ_CHECK(len == n * 6 / 8, "n base64 characters decode to floor(6n/8) bytes");
        FUZZ_CHECK(dec[len] == '\0', "the decoded bytes are NUL-terminated");
        free(dec);
    }
    free(in);
    return 0;
}
