/* buf.c -- growable buffer and JSON string escaping (see buf.h). */
#include "buf.h"

#include <assert.h>
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

char *buf_space(struct buf *b, size_t n)
{
    return reserve(b, n) ? b->data + b->len : NULL;
}

void buf_wrote(struct buf *b, const char *end)
{
    assert(end >= b->data + b->len && end < b->data + b->cap);
    b->len = (size_t)(end - b->data);
    b->data[b->len] = '\0';
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

/* The escape of the byte at p[i] (n bytes in all) into e, or 0 when it is copied as it is
 * (with the rest of its UTF-8 sequence: *skip is the sequence's length). */
static size_t escape_at(const unsigned char *p, size_t i, size_t n, char e[6], size_t *skip)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char c = p[i];
    *skip = 1;
    if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80)
        return 0;
    size_t ul = c >= 0x80 ? utf8_len(p + i, n - i) : 0;
    if (ul > 0) {
        *skip = ul;
        return 0;
    }
    e[0] = '\\';
    if (c == '"' || c == '\\') {
        e[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t' || c == '\r') {
        e[1] = c == '\n' ? 'n' : c == '\t' ? 't' : 'r';
        return 2;
    }
    memcpy(e + 1, "u00", 3);
    e[4] = hex[c >> 4];
    e[5] = hex[c & 15];
    return 6;
}

size_t json_escaped_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t out = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) { /* the usual byte, inline */
            i++;
            out++;
            continue;
        }
        char e[6];
        size_t skip, m = escape_at(p, i, n, e, &skip);
        out += m ? m : skip;
        i += skip;
    }
    return out;
}

char *json_escape(char *out, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0; /* start of the pending run of bytes copied verbatim */
    for (size_t i = 0; i < n;) {
        unsigned char c = p[i];
        if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
            i++;
            continue;
        }
        char e[6];
        size_t skip, m = escape_at(p, i, n, e, &skip);
        if (m == 0) {
            i += skip;
            continue;
        }
        memcpy(out, p + run, i - run);
        out += i - run;
        memcpy(out, e, m);
        out += m;
        i++;
        run = i;
    }
    memcpy(out, p + run, n - run);
    return out + (n - run);
}

void buf_add_json_chars(struct buf *b, const char *s, size_t n)
{
    size_t m = json_escaped_len(s, n);
    if (!reserve(b, m))
        return;
    b->len = (size_t)(json_escape(b->data + b->len, s, n) - b->data);
    b->data[b->len] = '\0';
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
