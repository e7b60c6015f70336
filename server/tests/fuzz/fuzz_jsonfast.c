/* fuzz_jsonfast.c -- jsonfast_parse (jsonfast.c) against jansson on any bytes: what jsonfast
 * takes, json_loadb with JSON_REJECT_DUPLICATES takes too, as a tree of the same types, values
 * and key order, never deeper than the depth asked (the input's first byte picks it, 1-64);
 * nothing is read past the input and the tree is freed (ASan's leak check). */
#define _DEFAULT_SOURCE
#include <jansson.h>
#include <stdbool.h>

#include "fuzz.h"
#include "jsonfast.h"
#include "jsonpos.h"

static bool same_tree(json_t *a, json_t *b)
{
    if (json_typeof(a) != json_typeof(b))
        return false;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return false;
        void *ia = json_object_iter(a), *ib = json_object_iter(b);
        for (; ia && ib; ia = json_object_iter_next(a, ia), ib = json_object_iter_next(b, ib)) {
            size_t na = json_object_iter_key_len(ia), nb = json_object_iter_key_len(ib);
            if (na != nb || memcmp(json_object_iter_key(ia), json_object_iter_key(ib), na) != 0 ||
                !same_tree(json_object_iter_value(ia), json_object_iter_value(ib)))
                return false;
        }
        return !ia && !ib;
    }
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_tree(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_INTEGER:
        return json_integer_value(a) == json_integer_value(b);
    case JSON_REAL:
        return false;
    default:
        return true;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t max_depth = 1 + data[0] % 64;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    /* A copy of exactly len bytes, so ASan sees any read past the end. */
    char *copy = malloc(len ? len : 1);
    if (!copy)
        abort();
    memcpy(copy, text, len);
    json_t *f = jsonfast_parse(copy, len, max_depth);
    if (f) {
        json_error_t e;
        json_t *j = json_loadb(copy, len, JSON_REJECT_DUPLICATES, &e);
        FUZZ_CHECK(j != NULL, "jsonfast took a body jansson refuses");
        FUZZ_CHECK(json_is_object(f), "jsonfast returned a top level that is not an object");
        FUZZ_CHECK(same_tree(f, j), "jsonfast's tree differs from jansson's");
        size_t off;
        FUZZ_CHECK(!jsonpos_too_deep(copy, len, max_depth, &off), "jsonfast took a body too deep");
        json_decref(j);
        json_decref(f);
    }
    free(copy);
    return 0;
}
