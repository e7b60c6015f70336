/* fuzz.h -- what the libFuzzer harnesses (server/tests/fuzz/fuzz_*.c, `make fuzz`) share: the
 * entry point libFuzzer calls once per input, a NUL-terminated copy of an input, and FUZZ_CHECK,
 * which reports a broken property and aborts, so libFuzzer keeps the input as a crash. Each
 * harness is one process and one thread; nothing here is used by the server. */
#ifndef FAKEGATE_FUZZ_H
#define FAKEGATE_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Called by libFuzzer with each input (`size` bytes, borrowed for the call); returns 0. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input as a C string, cut at its first NUL as a header or a query would be (caller
 * frees). Aborts when out of memory: libFuzzer reports that as an OOM of its own first. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    size_t n = strnlen((const char *)data, size);
    char *s = malloc(n + 1);
    if (!s)
        abort();
    memcpy(s, data, n);
    s[n] = '\0';
    return s;
}

static inline void fuzz_fail(const char *file, int line, const char *cond, const char *what)
{
    fprintf(stderr, "%s:%d: property broken: %s (%s)\n", file, line, what, cond);
    abort();
}

/* Abort with `what` unless `cond` holds. */
#define FUZZ_CHECK(cond, what) ((cond) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #cond, what))

#endif
