/* jsonpos.c -- places in JSON text (jsonpos.h). A small scanner steps over tokens of text that
 * jansson has already accepted, so it never diagnoses anything; on other text it stays inside
 * the buffer and answers something. Columns count characters as jansson's own errors do. */
#include "jsonpos.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

/* ---- Scanning -------------------------------------------------------------------------------- */

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static size_t skip_ws(const char *s, size_t len, size_t i)
{
    while (i < len && is_ws(s[i]))
        i++;
    return i;
}

/* s[i] is an opening quote; returns the offset just past the closing one (len if none). */
static size_t skip_string(const char *s, size_t len, size_t i)
{
    for (i++; i < len; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return len;
}

/* Steps over one value (scalar, or a whole object/array) starting at or after i. */
static size_t skip_value(const char *s, size_t len, size_t i)
{
    size_t depth = 0;
    do {
        i = skip_ws(s, len, i);
        if (i >= len)
            return len;
        char c = s[i];
        if (c == '"') {
            i = skip_string(s, len, i);
        } else if (c == '{' || c == '[') {
            depth++;
            i++;
        } else if (c == '}' || c == ']') {
            if (depth == 0) /* not a value: only in text jansson rejects */
                return i;
            depth--;
            i++;
        } else if (c == ',' || c == ':') {
            i++;
        } else {
            while (i < len && !is_ws(s[i]) && s[i] != ',' && s[i] != ']' && s[i] != '}')
                i++;
        }
    } while (depth > 0);
    return i;
}

bool jsonpos_too_deep(const char *text, size_t len, size_t max_depth, size_t *off)
{
    size_t depth = 0;
    for (size_t i = 0; i < len; i++) {
        char c = text[i];
        if (c == '"') {
            i = skip_string(text, len, i) - 1; /* onto the closing quote (or the last byte) */
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth) {
                *off = i;
                return true;
            }
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        }
    }
    return false;
}

/* The 4 hex digits at s[i, i+4) (i + 4 <= end), or -1. */
static long hex4(const char *s, size_t end, size_t i)
{
    if (end < 4 || i > end - 4)
        return -1;
    long v = 0;
    for (size_t k = 0; k < 4; k++) {
        int d = hex_digit(s[i + k]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Decodes the escape at s[i] == '\\' (the string's contents end before `end`) into out (UTF-8,
 * *n bytes). Returns the offset just past it, or 0 for an escape jansson would reject. */
static size_t decode_escape(const char *s, size_t end, size_t i, unsigned char out[4], size_t *n)
{
    if (i + 1 >= end)
        return 0;
    static const char simple_in[] = "\"\\/bfnrt", simple_out[] = "\"\\/\b\f\n\r\t";
    const char *p = strchr(simple_in, s[i + 1]);
    if (s[i + 1] != '\0' && p != NULL) {
        out[0] = (unsigned char)simple_out[p - simple_in];
        *n = 1;
        return i + 2;
    }
    if (s[i + 1] != 'u')
        return 0;
    long cp = hex4(s, end, i + 2);
    size_t next = i + 6;
    if (cp < 0 || (cp >= 0xDC00 && cp <= 0xDFFF))
        return 0;
    if (cp >= 0xD800 && cp <= 0xDBFF) { /* a surrogate pair: the low half must follow */
        if (next + 1 >= end || s[next] != '\\' || s[next + 1] != 'u')
            return 0;
        long lo = hex4(s, end, next + 2);
        if (lo < 0xDC00 || lo > 0xDFFF)
            return 0;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        next += 6;
    }
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        *n = 1;
    } else if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        *n = 2;
    } else if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        *n = 3;
    } else {
        out[0] = (unsigned char)(0xF0 | (cp >> 18));
        out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (unsigned char)(0x80 | (cp & 0x3F));
        *n = 4;
    }
    return next;
}

/* Does the string token s[start, end) (quotes included) decode to `key`? With `decode` false, a
 * token with escapes never matches. */
static bool key_matches(const char *s, size_t start, size_t end, const char *key, bool decode)
{
    if (end < start + 2 || s[end - 1] != '"')
        return false;
    const unsigned char *k = (const unsigned char *)key;
    size_t i = start + 1, stop = end - 1;
    while (i < stop) {
        if (s[i] != '\\') {
            if (*k == '\0' || (unsigned char)s[i] != *k)
                return false;
            i++;
            k++;
            continue;
        }
        unsigned char dec[4];
        size_t n = 0;
        if (!decode || (i = decode_escape(s, stop, i, dec, &n)) == 0)
            return false;
        for (size_t j = 0; j < n; j++, k++)
            if (dec[j] == '\0' || *k != dec[j]) /* a C string key holds no NUL */
                return false;
    }
    return *k == '\0';
}

/* jsonpos_find, with escaped keys matching only if `decode`. */
static bool find(const char *s, size_t len, const struct jsonpos_step *path, size_t depth,
                 bool want_key, bool decode, size_t *off)
{
    size_t i = skip_ws(s, len, 0);
    for (size_t d = 0; d < depth; d++) {
        const struct jsonpos_step *st = &path[d];
        if (i >= len || s[i] != (st->key != NULL ? '{' : '[')) {
            *off = i < len ? i : len;
            return false;
        }
        size_t container = i, n = 0;
        i = skip_ws(s, len, i + 1);
        for (;;) {
            if (i >= len || s[i] == '}' || s[i] == ']' || (st->key != NULL && s[i] != '"')) {
                *off = container;
                return false;
            }
            if (st->key != NULL) {
                size_t k = i, kend = skip_string(s, len, i);
                i = skip_ws(s, len, kend);
                if (i < len && s[i] == ':')
                    i = skip_ws(s, len, i + 1);
                if (key_matches(s, k, kend, st->key, decode)) {
                    if (want_key && d + 1 == depth) {
                        *off = k;
                        return true;
                    }
                    break;
                }
            } else if (n++ == st->index) {
                break;
            }
            i = skip_ws(s, len, skip_value(s, len, i));
            if (i < len && s[i] == ',')
                i = skip_ws(s, len, i + 1);
        }
    }
    *off = i;
    return true;
}

bool jsonpos_find(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                  bool want_key, size_t *off)
{
    return find(text, len, path, depth, want_key, true, off);
}

bool jsonpos_member(const char *text, size_t len, const char *name, size_t *off)
{
    struct jsonpos_step step = {.key = name, .index = 0};
    size_t at;
    if (!find(text, len, &step, 1, false, false, &at) || at >= len)
        return false;
    *off = at;
    return true;
}

/* ---- Lines and columns ----------------------------------------------------------------------- */

static bool is_continuation(char c)
{
    return ((unsigned char)c & 0xC0) == 0x80;
}

void jsonpos_line_col(const char *text, size_t len, size_t off, size_t *line, size_t *col)
{
    size_t ln = 1, chars = 0; /* characters on the line before off */
    if (off > len)
        off = len;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            ln++;
            chars = 0;
        } else if (!is_continuation(text[i])) {
            chars++;
        }
    }
    /* off starts a character (or is the end): the next column; inside one: that one's. */
    size_t c = off < len && is_continuation(text[off]) ? chars : chars + 1;
    *line = ln;
    *col = c > 0 ? c : 1;
}

/* ---- jansson's errors ------------------------------------------------------------------------ */

/* jansson reports the offset just past the token it stopped at, and quotes that token at the end
 * of its message ("... near 'tok'", cut short when long). Point at the token's first byte. */
size_t jsonpos_error_offset(const char *text, size_t len, const json_error_t *je)
{
    size_t off = je->position < 0 ? 0 : (size_t)je->position;
    if (off > len)
        off = len;
    const char *near = strstr(je->text, " near '");
    if (near == NULL)
        return off;
    const char *tok = near + 7;
    size_t n = strlen(tok);
    bool whole = n > 0 && tok[n - 1] == '\'';
    if (whole)
        n--;
    if (n == 0 || n > off)
        return off;
    if (whole)
        return memcmp(text + off - n, tok, n) == 0 ? off - n : off;
    for (size_t s = off - n + 1; s-- > 0;)
        if (memcmp(text + s, tok, n) == 0)
            return s;
    return off;
}

bool jsonpos_key_before(const char *text, size_t len, size_t off, char *out, size_t out_len)
{
    size_t i = off < len ? off : len;
    while (i > 0 && text[i - 1] != '\0' && strchr("0123456789-+.eE \t\r\n", text[i - 1]))
        i--;
    if (i == 0 || text[i - 1] != ':')
        return false;
    i--;
    while (i > 0 && text[i - 1] != '\0' && strchr(" \t\r\n", text[i - 1]))
        i--;
    if (i == 0 || text[i - 1] != '"')
        return false;
    size_t end = --i;
    while (i > 0 && text[i - 1] != '"')
        i--;
    if (i == 0 || end - i >= out_len)
        return false;
    memcpy(out, text + i, end - i);
    out[end - i] = '\0';
    return true;
}

/* ---- Messages -------------------------------------------------------------------------------- */

void jsonpos_path_str(const struct jsonpos_step *path, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && used < size; i++) {
        int w;
        if (path[i].key != NULL)
            w = snprintf(buf + used, size - used, "%s%s", i > 0 ? "." : "", path[i].key);
        else
            w = snprintf(buf + used, size - used, "[%zu]", path[i].index);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

size_t jsonpos_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[65];
    if (la > 64 || lb > 64)
        return SIZE_MAX;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] == b[j - 1] ? 0 : 1);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *jsonpos_suggest(const char *key, const char *const *known)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; known[i] != NULL; i++) {
        size_t d = jsonpos_edit_distance(key, known[i]);
        if (d < best_d && d < strlen(known[i])) {
            best = known[i];
            best_d = d;
        }
    }
    return best;
}
