/* jsonfast.c -- one-pass parse of plain JSON request bodies into a jansson tree (see
 * jsonfast.h). Invariant: whatever it returns, json_loadb with JSON_REJECT_DUPLICATES returns
 * too (check_jsonfast compares the trees); on any doubt it declines. */
#include "jsonfast.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define JSONFAST_MAX_DEPTH 64 /* deeper bodies are rare: jansson (and --max-json-depth) */

struct parser {
    const char *s, *end;
    size_t depth, max_depth;
};

static void skip_ws(struct parser *p)
{
    while (p->s < p->end && (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t'))
        p->s++;
}

/* A string of printable ASCII without escapes, at p->s == '"': its bytes in *start, *len, and
 * p->s past the closing quote. False for anything else (escapes, other bytes, no end). */
static bool plain_string(struct parser *p, const char **start, size_t *len)
{
    if (p->s >= p->end || *p->s != '"')
        return false;
    const char *b = ++p->s;
    for (; p->s < p->end; p->s++) {
        unsigned char c = (unsigned char)*p->s;
        if (c == '"') {
            *start = b;
            *len = (size_t)(p->s - b);
            p->s++;
            return true;
        }
        if (c < 0x20 || c > 0x7e || c == '\\')
            return false;
    }
    return false;
}

/* An integer of 1-18 digits (so it fits json_int_t): no leading zero, no "-0", no fraction or
 * exponent (a real, which this parser leaves to jansson). */
static json_t *integer(struct parser *p)
{
    bool neg = *p->s == '-';
    if (neg)
        p->s++;
    const char *d = p->s;
    uint64_t v = 0;
    while (p->s < p->end && *p->s >= '0' && *p->s <= '9')
        v = v * 10 + (uint64_t)(*p->s++ - '0');
    size_t n = (size_t)(p->s - d);
    if (n == 0 || n > 18 || (d[0] == '0' && (n > 1 || neg)))
        return NULL;
    if (p->s < p->end && (*p->s == '.' || *p->s == 'e' || *p->s == 'E'))
        return NULL;
    return json_integer(neg ? -(json_int_t)v : (json_int_t)v);
}

static json_t *value(struct parser *p);

static json_t *object(struct parser *p)
{
    if (++p->depth > p->max_depth)
        return NULL;
    json_t *o = json_object();
    if (!o)
        return NULL;
    p->s++; /* '{' */
    skip_ws(p);
    if (p->s < p->end && *p->s == '}') {
        p->s++;
        p->depth--;
        return o;
    }
    for (;;) {
        const char *k;
        size_t kn;
        if (!plain_string(p, &k, &kn))
            goto decline;
        skip_ws(p);
        if (p->s >= p->end || *p->s != ':')
            goto decline;
        p->s++;
        skip_ws(p);
        json_t *v = value(p);
        if (!v)
            goto decline;
        if (json_object_getn(o, k, kn)) { /* a duplicate: jansson's error, with its place */
            json_decref(v);
            goto decline;
        }
        if (json_object_setn_new_nocheck(o, k, kn, v) != 0) /* it took v, even on failure */
            goto decline;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            skip_ws(p);
            continue;
        }
        if (p->s < p->end && *p->s == '}') {
            p->s++;
            p->depth--;
            return o;
        }
        goto decline;
    }
decline:
    json_decref(o);
    return NULL;
}

static json_t *array(struct parser *p)
{
    if (++p->depth > p->max_depth)
        return NULL;
    json_t *a = json_array();
    if (!a)
        return NULL;
    p->s++; /* '[' */
    skip_ws(p);
    if (p->s < p->end && *p->s == ']') {
        p->s++;
        p->depth--;
        return a;
    }
    for (;;) {
        json_t *v = value(p);
        if (!v || json_array_append_new(a, v) != 0) /* it took v, even on failure */
            goto decline;
        skip_ws(p);
        if (p->s < p->end && *p->s == ',') {
            p->s++;
            skip_ws(p);
            continue;
        }
        if (p->s < p->end && *p->s == ']') {
            p->s++;
            p->depth--;
            return a;
        }
        goto decline;
    }
decline:
    json_decref(a);
    return NULL;
}

/* true, false or null spelled out, at p->s. */
static json_t *literal(struct parser *p, const char *word, size_t n, json_t *v)
{
    if ((size_t)(p->end - p->s) < n || memcmp(p->s, word, n) != 0)
        return NULL;
    p->s += n;
    return v;
}

/* A value at p->s (no whitespace before it). */
static json_t *value(struct parser *p)
{
    if (p->s >= p->end)
        return NULL;
    switch (*p->s) {
    case '{':
        return object(p);
    case '[':
        return array(p);
    case '"': {
        const char *s;
        size_t n;
        return plain_string(p, &s, &n) ? json_stringn_nocheck(s, n) : NULL;
    }
    case 't':
        return literal(p, "true", 4, json_true());
    case 'f':
        return literal(p, "false", 5, json_false());
    case 'n':
        return literal(p, "null", 4, json_null());
    default:
        return *p->s == '-' || (*p->s >= '0' && *p->s <= '9') ? integer(p) : NULL;
    }
}

json_t *jsonfast_parse(const char *text, size_t len, size_t max_depth)
{
    struct parser p = {text, text + len, 0,
                       max_depth < JSONFAST_MAX_DEPTH ? max_depth : JSONFAST_MAX_DEPTH};
    skip_ws(&p);
    if (p.s >= p.end || *p.s != '{')
        return NULL;
    json_t *root = object(&p);
    if (!root)
        return NULL;
    skip_ws(&p);
    if (p.s != p.end) { /* trailing bytes: jansson's "end of file expected" */
        json_decref(root);
        return NULL;
    }
    return root;
}
