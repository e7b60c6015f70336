/* check_jsonfast.c -- jsonfast_parse against jansson: whatever it takes, json_loadb with
 * JSON_REJECT_DUPLICATES takes too and builds the same tree (types, values, key order), within
 * the depth asked; what it declines is left to jansson. Over hand-picked bodies, every prefix
 * and every one-byte edit of plain bodies, and random documents of its subset with noise. */
#include <check.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "jsonfast.h"
#include "jsonpos.h"
#include "rng.h"

/* Same type, value and (objects) key order. */
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
        return false; /* jsonfast never makes one */
    default:
        return true;
    }
}

/* Parse t both ways; 1 when jsonfast took it (and agreed with jansson), 0 when it declined. */
static int check_one(const char *t, size_t n, size_t max_depth)
{
    json_t *f = jsonfast_parse(t, n, max_depth);
    if (!f)
        return 0;
    json_error_t e;
    json_t *j = json_loadb(t, n, JSON_REJECT_DUPLICATES, &e);
    ck_assert_msg(j != NULL, "jsonfast took what jansson refuses (%s): %.*s", e.text, (int)n, t);
    ck_assert(json_is_object(f));
    ck_assert_msg(same_tree(f, j), "trees differ for: %.*s", (int)n, t);
    size_t off;
    ck_assert_msg(!jsonpos_too_deep(t, n, max_depth, &off), "took a body deeper than %zu: %.*s",
                  max_depth, (int)n, t);
    json_decref(f);
    json_decref(j);
    return 1;
}

static int check_z(const char *t, size_t max_depth)
{
    return check_one(t, strlen(t), max_depth);
}

START_TEST(test_jsonfast_takes_plain_bodies_as_jansson_builds_them)
{
    static const char *const taken[] = {
        "{\"paymentKey\":\"pk_1\",\"orderId\":\"order_0001\",\"amount\":15000}",
        " \t\r\n{ \"paymentKey\" : \"pk_1\" ,\n \"orderId\":\"o\", \"amount\" : -15000 } \n",
        "{}",
        "{\"\":0}",
        "{\"a\":[],\"b\":{},\"c\":[1,[2,[3]],{\"d\":null}],\"e\":true,\"f\":false}",
        "{\"n\":999999999999999999,\"m\":-999999999999999999,\"z\":0}",
        "{\"s\":\" !#$%&'()*+,-./09:;<=>?@AZ[]^_`az{|}~\"}",
        "{\"cancelReason\":\"customer asked\",\"cancelAmount\":1000,\"refundReceiveAccount\":"
        "{\"bank\":\"20\",\"accountNumber\":\"1234\",\"holderName\":\"kim\"}}",
    };
    for (size_t i = 0; i < sizeof taken / sizeof taken[0]; i++)
        ck_assert_msg(check_z(taken[i], 32) == 1, "declined: %s", taken[i]);
    json_t *o = jsonfast_parse(taken[0], strlen(taken[0]), 32);
    ck_assert_str_eq(json_string_value(json_object_get(o, "paymentKey")), "pk_1");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "amount")), 15000);
    json_decref(o);
}
END_TEST

START_TEST(test_jsonfast_declines_what_only_jansson_can_answer)
{
    static const char *const declined[] = {
        "",
        "   ",
        "[]",
        "\"s\"",
        "1",
        "{\"a\":\"\\n\"}",                 /* an escape */
        "{\"a\\u0062\":1}",                /* an escaped key */
        "{\"a\":\"\xed\x95\x9c\"}",        /* UTF-8 (valid, but not ASCII) */
        "{\"a\":\"\xff\"}",                /* not UTF-8: jansson's error */
        "{\"a\":\"\x7f\"}",
        "{\"a\":\"tab\there\"}",            /* a control byte: jansson's error */
        "{\"a\":1.5}",
        "{\"a\":1e3}",
        "{\"a\":1E3}",
        "{\"a\":-0}",
        "{\"a\":01}",
        "{\"a\":1234567890123456789}",      /* 19 digits */
        "{\"a\":99999999999999999999999}",  /* too big integer */
        "{\"a\":+1}",
        "{\"a\":-}",
        "{\"a\":1,\"a\":2}",               /* duplicate key */
        "{\"a\":1,}",
        "{\"a\":1 \"b\":2}",
        "{\"a\" 1}",
        "{a:1}",
        "{\"a\":tru}",
        "{\"a\":truex}",
        "{\"a\":nul}",
        "{\"a\":[1,]}",
        "{\"a\":[1 2]}",
        "{\"a\":1}x",
        "{\"a\":1}{}",
        "{\"a\":1",
        "{\"a\":\"unterminated}",
        "\xef\xbb\xbf{}", /* a BOM */
    };
    for (size_t i = 0; i < sizeof declined / sizeof declined[0]; i++)
        ck_assert_msg(check_z(declined[i], 32) == 0, "took: %s", declined[i]);
    const char nul[] = "{\"a\":1}\0";
    ck_assert_int_eq(check_one(nul, sizeof nul - 1, 32), 0); /* a NUL after the object */
}
END_TEST

START_TEST(test_jsonfast_keeps_within_the_depth_asked)
{
    const char *five = "{\"a\":{\"b\":[{\"c\":[1]}]}}"; /* 5 levels */
    ck_assert_int_eq(check_z(five, 5), 1);
    ck_assert_int_eq(check_z(five, 4), 0);
    ck_assert_int_eq(check_z(five, 1), 0);
    ck_assert_int_eq(check_z("{}", 1), 1);
    /* {"a": and `arrays` nested arrays: 1 + arrays levels. */
    char deep[300];
    for (int arrays = 62; arrays <= 65; arrays++) {
        size_t n = 0;
        memcpy(deep, "{\"a\":", 5);
        n = 5;
        for (int i = 0; i < arrays; i++)
            deep[n++] = '[';
        for (int i = 0; i < arrays; i++)
            deep[n++] = ']';
        deep[n++] = '}';
        /* 64 levels at most, whatever the limit; within it, the limit asked. */
        ck_assert_int_eq(check_one(deep, n, 2048), 1 + arrays <= 64);
        ck_assert_int_eq(check_one(deep, n, (size_t)arrays), 0);
        ck_assert_int_eq(check_one(deep, n, (size_t)arrays + 1), 1 + arrays <= 64);
    }
}
END_TEST

/* Every prefix and every one-byte replacement, deletion and insertion of plain bodies. */
START_TEST(test_jsonfast_agrees_with_jansson_on_every_one_byte_edit)
{
    static const char *const seeds[] = {
        "{\"paymentKey\":\"pk_20240213_abc\",\"orderId\":\"order-0001\",\"amount\":15000}",
        "{\"a\":[1,-2,{\"b\":null}],\"c\":true,\"d\":false,\"e\":\"x y\"}",
        "{ \"k\" : [ ] , \"l\" : { } }",
    };
    static const char edits[] = "{}[]\",: \t\n09-.eEtfnulx\\\x01\x7f\x80\xff";
    int taken = 0, tried = 0;
    char buf[256];
    for (size_t si = 0; si < sizeof seeds / sizeof seeds[0]; si++) {
        const char *s = seeds[si];
        size_t n = strlen(s);
        for (size_t k = 0; k <= n; k++) { /* prefixes */
            taken += check_one(s, k, 32);
            tried++;
        }
        for (size_t i = 0; i < n; i++)
            for (size_t e = 0; e < sizeof edits - 1; e++) {
                memcpy(buf, s, n); /* replace byte i */
                buf[i] = edits[e];
                taken += check_one(buf, n, 32);
                memcpy(buf, s, i); /* insert before byte i */
                buf[i] = edits[e];
                memcpy(buf + i + 1, s + i, n - i);
                taken += check_one(buf, n + 1, 32);
                tried += 2;
            }
        for (size_t i = 0; i < n; i++) { /* delete byte i */
            memcpy(buf, s, i);
            memcpy(buf + i, s + i + 1, n - i - 1);
            taken += check_one(buf, n - 1, 32);
            tried++;
        }
    }
    ck_assert_int_gt(taken, 100);      /* the edits that stay plain JSON are taken ... */
    ck_assert_int_lt(taken, tried / 2); /* ... most are not */
}
END_TEST

/* A random document of the subset (with sometimes a token outside it) into b. */
static void gen(struct rng *r, char *b, size_t *n, size_t cap, int depth)
{
    static const char *const atoms[] = {"0", "7", "-12", "15000", "999999999999999999", "true",
                                        "false", "null", "\"\"", "\"pk_x\"", "\"a b\"",
                                        "1.5", "\"\\n\"", "01", "\"\xc3\xa9\""};
    uint64_t x = rng_next(r);
    if (*n + 64 >= cap)
        return;
    if (depth > 0 && x % 3 == 0) {
        bool obj = x & 8;
        b[(*n)++] = obj ? '{' : '[';
        int k = (int)(x >> 8) % 4;
        for (int i = 0; i < k && *n + 64 < cap; i++) {
            if (i)
                b[(*n)++] = ',';
            if (x >> 20 & 1)
                b[(*n)++] = ' ';
            if (obj)
                *n += (size_t)snprintf(b + *n, cap - *n, "\"k%d\":", (int)(rng_next(r) % 5));
            gen(r, b, n, cap, depth - 1);
        }
        b[(*n)++] = obj ? '}' : ']';
        return;
    }
    const char *a = atoms[(x >> 4) % (x % 7 == 0 ? 15 : 11)];
    size_t l = strlen(a);
    memcpy(b + *n, a, l);
    *n += l;
}

START_TEST(test_jsonfast_agrees_with_jansson_on_random_documents)
{
    struct rng r;
    rng_seed(&r, 25);
    char b[2048];
    int taken = 0;
    for (int iter = 0; iter < 30000; iter++) {
        size_t n = 0;
        memcpy(b, "{\"top\":", 7);
        n = 7;
        gen(&r, b, &n, sizeof b - 2, 6);
        b[n++] = '}';
        taken += check_one(b, n, 1 + (size_t)(rng_next(&r) % 8));
    }
    ck_assert_int_gt(taken, 3000);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("jsonfast");
    TCase *tc = tcase_create("jsonfast");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_jsonfast_takes_plain_bodies_as_jansson_builds_them);
    tcase_add_test(tc, test_jsonfast_declines_what_only_jansson_can_answer);
    tcase_add_test(tc, test_jsonfast_keeps_within_the_depth_asked);
    tcase_add_test(tc, test_jsonfast_agrees_with_jansson_on_every_one_byte_edit);
    tcase_add_test(tc, test_jsonfast_agrees_with_jansson_on_random_documents);
    suite_add_tcase(s, tc);
    return s;
}
