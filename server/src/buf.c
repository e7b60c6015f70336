/* buf.c -- growable buffer and JSON string escaping (see buf.h). */
#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void buf_init(struct buf *b)
{
    memset(b, 0, sizeof *b);
}

void buf_fini(struct buf *b)
{
    free(b->data);
    buf_init(b);
}

char *buf_steal(struct buf *b, size_t *len)
{
    char *d = b->data;
    if (len)
        *len = b->len;
    buf_init(b);
    return d;
}

static bool reserve(struct buf *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < b->len + extra + 1)
        ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (!nd) {
        b->oom = true;
        return false;
    }
    b->data = nd;
    b->cap = ncap;
    return true;
}

bool buf_reserve(struct buf *b, size_t extra)
{
    if (b->cap == 0 && !b->oom) { /* the first allocation: exactly what was asked */
        b->data = malloc(extra + 1);
        if (!b->data) {
            b->oom = true;
            return false;
        }
        b->cap = extra + 1;
        b->data[0] = '\0';
        return true;
    }
    return reserve(b, extra);
}

void buf_add(struct buf *b, const void *p, size_t n)
{
    if (!reserve(b, n))
        return;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void buf_adds(struct buf *b, const char *s)
{
    buf_add(b, s, strlen(s));
}

void buf_addc(struct buf *b, char c)
{
    buf_add(b, &c, 1);
}

void buf_addf(struct buf *b, const char *fmt, ...)
{
    /* One pass when the result fits in what is already reserved (the usual case). */
    size_t room = b->cap > b->len ? b->cap - b->len : 0;
    va_list ap;
    va_start(ap, fmt);
    int n = b->oom ? -1 : vsnprintf(room ? b->data + b->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= room) {
        if (!reserve(b, (size_t)n))
            return;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}

void buf_add_u64(struct buf *b, uint64_t v)
{
    char tmp[20];
    size_t i = sizeof tmp;
    do {
        tmp[--i] = (char)('0' + (int)(v % 10));
        v /= 10;
    } while (v);
    buf_add(b, tmp + i, sizeof tmp - i);
}

void buf_add_i64(struct buf *b, int64_t v)
{
    if (v < 0) {
        buf_addc(b, '-');
        buf_add_u64(b, (uint64_t)0 - (uint64_t)v);
    } else {
        buf_add_u64(b, (uint64_t)v);
    }
}

/* Length of the valid UTF-8 sequence starting at s (at most n bytes), or 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        cp = c & 0x1fu;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        cp = c & 0x0fu;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        cp = c & 0x07u;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3fu);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void buf_add_json_chars(struct buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending run of bytes copied verbatim */
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        size_t ul = c >= 0x80 ? utf8_len(p + i, n - i) : 0;
        if (ul > 0) {
            i += ul;
            continue;
        }
        buf_add(b, p + run, i - run);
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            buf_add(b, e, 2);
        } else if (c == '\n') {
            buf_add(b, "\\n", 2);
        } else if (c == '\t') {
            buf_add(b, "\\t", 2);
        } else if (c == '\r') {
            buf_add(b, "\\r", 2);
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            buf_add(b, e, 6);
        }
        i++;
        run = i;
    }
    buf_add(b, p + run, n - run);
}

void buf_add_json_str(struct buf *b, const char *s, size_t n)
{
    buf_addc(b, '"');
    buf_add_json_chars(b, s, n);
    buf_addc(b, '"');
}

void buf_add_json_strz(struct buf *b, const char *s)
{
    if (!s)
        buf_add(b, "null", 4);
    else
        buf_add_json_str(b, s, strlen(s));
}
