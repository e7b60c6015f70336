/* jsonpos.h -- places in JSON text for messages that say where: the value at a path of keys and
 * indices, a top-level member's value, the token a jansson error points at, offset ->
 * line:column, and the path strings and did-you-mean such messages use. Columns count
 * characters, as jansson's own errors do, so a syntax error and a semantic error about the same
 * place agree. No I/O, no allocation; every function is pure, callable from any thread. */
#ifndef FAKEGATE_JSONPOS_H
#define FAKEGATE_JSONPOS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* One step of a path into a JSON value: a member by key, or an array element by index. */
struct jsonpos_step {
    const char *key; /* NUL-terminated, as decoded (escapes resolved); NULL: an array element */
    size_t index;    /* the element's index from 0, when key is NULL */
};

/* Find the value at `path` (`depth` steps from the top-level value; borrowed, not kept) in the
 * JSON text `text` of `len` bytes, or, with `want_key` and a key as the last step, that key. A
 * key written with escapes matches its decoded form. Returns true and sets *off to the byte
 * offset of the value's first byte (or of the key's opening quote). False if a step is not
 * there: *off is then the deepest place reached (the object or array that lacks the step, or
 * the value that is not a container). The text should be JSON that jansson accepted; for any
 * other text the answer is some offset in [0, len], and nothing past len is read.
 * Thread: any; pure. */
bool jsonpos_find(const char *text, size_t len, const struct jsonpos_step *path, size_t depth,
                  bool want_key, size_t *off);

/* Is `text` (`len` bytes) nested deeper than `max_depth` containers? Scans the raw bytes, before
 * any parser builds a tree: every '{' or '[' outside a string opens a level (the top-level
 * object or array is level 1), every '}' or ']' closes one; inside a string a backslash escapes
 * the next byte, so brackets and quotes in strings never count. True, with *off = the byte offset
 * of the first bracket that opens level max_depth + 1; false if none does. It does not validate
 * the JSON: on text a parser would reject it still answers, and reads nothing past len.
 * Thread: any; pure. */
bool jsonpos_too_deep(const char *text, size_t len, size_t max_depth, size_t *off);

/* Find the value of member `name` of the top-level object in `text` (`len` bytes): true and
 * *off = the byte offset of the value's first byte. False (*off untouched) if the text is not
 * an object, the member is not there, or its key is written with escapes (the caller's message
 * then names no place). Thread: any; pure. */
bool jsonpos_member(const char *text, size_t len, const char *name, size_t *off);

/* The line and column of byte offset `off` in `text` (`len` bytes; an offset past len counts as
 * len): both from 1. Lines end at '\n' (so CRLF is one line end; the '\r' is the last column of
 * its line). A column counts characters: every byte that is not a UTF-8 continuation byte
 * (10xxxxxx) starts one, a tab is one; an offset inside a UTF-8 sequence gives its character's
 * column, and off == len the column just past the last character. Thread: any; pure. */
void jsonpos_line_col(const char *text, size_t len, size_t off, size_t *line, size_t *col);

/* The byte offset in `text` (`len` bytes) that a failed jansson load of it points at (`je`):
 * the first byte of the token jansson quotes in its message ("... near 'tok'"), or, without
 * one, je->position (bytes, clamped to [0, len]). Thread: any; pure. */
size_t jsonpos_error_offset(const char *text, size_t len, const json_error_t *je);

/* For jansson's "too big integer" error: the key of the member whose value is the number that
 * ends at or just before byte offset `off` (je->position, or one before it). Reads back over the
 * number and white space to the ':' and the key's closing quote, and copies the key's bytes as
 * written (escapes not decoded) to `out` (`out_len` bytes, NUL-terminated). False, `out`
 * untouched, if the text before `off` is not `"key": <number>` or the key does not fit.
 * Thread: any; pure. */
bool jsonpos_key_before(const char *text, size_t len, size_t off, char *out, size_t out_len);

/* Write `path` (`n` steps) as "routes.confirm.latency.of[1].ms" to `buf` (`size` >= 1 bytes;
 * cut short, still NUL-terminated, if it does not fit). A leading index is written "[0]"; keys
 * are written as they are. Thread: any; pure. */
void jsonpos_path_str(const struct jsonpos_step *path, size_t n, char *buf, size_t size);

/* Levenshtein distance between NUL-terminated `a` and `b`, in bytes (insert, delete or replace
 * one byte: one edit); SIZE_MAX when either is longer than 64 bytes. Thread: any; pure. */
size_t jsonpos_edit_distance(const char *a, const char *b);

/* The did-you-mean for an unknown `key`: the first of `known` (NULL-terminated) that is fewest
 * edits away, if that is at most two edits and fewer than its own length; else NULL. Borrowed
 * from `known`. Thread: any; pure. */
const char *jsonpos_suggest(const char *key, const char *const *known);

#endif
