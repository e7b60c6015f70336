/* buf.h -- a growable byte buffer and the JSON writing helpers the hot path uses instead of
 * building jansson trees (rendering a Payment with snprintf-style appends is several times
 * cheaper than json_t + json_dumps). Out of memory is sticky: `oom` is set and later appends
 * do nothing, so callers check once at the end. */
#ifndef FAKEGATE_BUF_H
#define FAKEGATE_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
    char *data;   /* NUL-terminated when len > 0 or after buf_cstr */
    size_t len;
    size_t cap;
    bool oom;
};

void buf_init(struct buf *b);
void buf_fini(struct buf *b);
/* Give the bytes to the caller (caller frees with free()); leaves `b` empty. */
char *buf_steal(struct buf *b, size_t *len);

void buf_add(struct buf *b, const void *p, size_t n);
void buf_adds(struct buf *b, const char *s);
void buf_addc(struct buf *b, char c);
__attribute__((format(printf, 2, 3))) void buf_addf(struct buf *b, const char *fmt, ...);
/* Make room for `extra` more bytes (and the NUL) now, so later appends do not reallocate; an
 * empty buffer gets exactly that much. Returns false when out of memory (and sets `oom`). */
bool buf_reserve(struct buf *b, size_t extra);
/* Room for `n` more bytes at the end (and the NUL), grown as by any append: where to write them,
 * or NULL when out of memory (`oom` set). Valid until the next call on `b`. buf_wrote(b, end)
 * then takes the bytes written up to `end` (within that room) as appended and writes the NUL. */
char *buf_space(struct buf *b, size_t n);
void buf_wrote(struct buf *b, const char *end);
/* Decimal, without snprintf (the response path writes several numbers per Payment). */
void buf_add_i64(struct buf *b, int64_t v);
void buf_add_u64(struct buf *b, uint64_t v);

/* Append `s` (n bytes) as a JSON string literal with quotes. Bytes that are not valid UTF-8 are
 * written as \u00XX of the byte's Latin-1 value, so the output is always valid JSON. */
void buf_add_json_str(struct buf *b, const char *s, size_t n);
/* The same without the quotes: the escaped characters only, for a string written in parts. */
void buf_add_json_chars(struct buf *b, const char *s, size_t n);
/* The bytes buf_add_json_chars writes for s (n bytes): n exactly when s needs no escape. */
size_t json_escaped_len(const char *s, size_t n);
/* Write them to out, which has room for json_escaped_len(s, n) bytes; returns the end. */
char *json_escape(char *out, const char *s, size_t n);
/* The same, NUL-terminated; NULL writes `null`. */
void buf_add_json_strz(struct buf *b, const char *s);

#endif
