/* check_jsonpos.c -- unit tests for jsonpos.c: paths into nested objects and arrays, a member's
 * value after UTF-8 text (its column in characters, the same as jansson's for a syntax error
 * there), escaped keys, the key before a too-big integer, CRLF line ends, offsets at and past the
 * end of the text, the nesting-depth scan (strings and escapes respected), and the message helpers
 * (path strings, edit distance, did-you-mean). */
#include <check.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "jsonpos.h"

/* Byte offset of the first occurrence of `needle` in `text` (which must contain it). */
static size_t offset_of(const char *text, const char *needle)
{
    const char *at = strstr(text, needle);
    ck_assert_msg(at != NULL, "\"%s\" not in the text", needle);
    return (size_t)(at - text);
}

/* jsonpos_line_col of `off` in `text`, checked against `line`:`col`. */
static void assert_line_col(const char *text, size_t off, size_t line, size_t col)
{
    size_t l = 0, c = 0;
    jsonpos_line_col(text, strlen(text), off, &l, &c);
    ck_assert_msg(l == line && c == col, "offset %zu: %zu:%zu, want %zu:%zu", off, l, c, line,
                  col);
}

static const char NESTED[] =
    "{\"name\": \"n\", \"routes\": {\"read\": {}, \"confirm\": {\"faults\": "
    "[{\"kind\": \"error\", \"p\": 0.25},"
    " {\"kind\": \"drip\", \"p\": 0.75, \"of\": [[1], [2, 3]]}]}}}";

START_TEST(test_jsonpos_find_value_through_objects_and_arrays)
{
    struct jsonpos_step path[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {NULL, 1},
                                  {"p", 0}};
    size_t off = SIZE_MAX;
    ck_assert(jsonpos_find(NESTED, strlen(NESTED), path, 5, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "0.75"));
    /* The key instead of the value: the opening quote of the second fault's "p". */
    ck_assert(jsonpos_find(NESTED, strlen(NESTED), path, 5, true, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "\"p\": 0.75"));
    /* An array in an array. */
    struct jsonpos_step deep[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {NULL, 1},
                                  {"of", 0}, {NULL, 1}, {NULL, 1}};
    ck_assert(jsonpos_find(NESTED, strlen(NESTED), deep, 7, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "3]]"));
    /* Depth 0 is the top-level value, after leading white space. */
    ck_assert(jsonpos_find(" \n [1]", 6, NULL, 0, false, &off));
    ck_assert_uint_eq(off, 3);
}
END_TEST

START_TEST(test_jsonpos_find_missing_step_gives_the_container)
{
    size_t off = SIZE_MAX;
    struct jsonpos_step absent[] = {{"routes", 0}, {"cancel", 0}};
    ck_assert(!jsonpos_find(NESTED, strlen(NESTED), absent, 2, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "{\"read\""));
    /* An index past the end: the array. */
    struct jsonpos_step past[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {NULL, 2}};
    ck_assert(!jsonpos_find(NESTED, strlen(NESTED), past, 4, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "[{\"kind\""));
    /* A key into an array, an index into a string: the value that is not that container. */
    struct jsonpos_step wrong[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {"p", 0}};
    ck_assert(!jsonpos_find(NESTED, strlen(NESTED), wrong, 4, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "[{\"kind\""));
    struct jsonpos_step into_string[] = {{"name", 0}, {NULL, 0}};
    ck_assert(!jsonpos_find(NESTED, strlen(NESTED), into_string, 2, false, &off));
    ck_assert_uint_eq(off, offset_of(NESTED, "\"n\""));
}
END_TEST

START_TEST(test_jsonpos_find_stays_inside_text_jansson_rejects)
{
    /* Cut short at every length: never a read past len, and the answer is within it. */
    struct jsonpos_step path[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {NULL, 1},
                                  {"p", 0}};
    for (size_t n = 0; n <= strlen(NESTED); n++) {
        char *cut = malloc(n + 1);
        ck_assert_ptr_nonnull(cut);
        memcpy(cut, NESTED, n);
        size_t off = SIZE_MAX;
        (void)jsonpos_find(cut, n, path, 5, false, &off);
        ck_assert_uint_le(off, n);
        (void)jsonpos_find(cut, n, path, 5, true, &off);
        ck_assert_uint_le(off, n);
        free(cut);
    }
    size_t off = SIZE_MAX;
    struct jsonpos_step key[] = {{"a", 0}, {NULL, 3}};
    (void)jsonpos_find("{1: ]]]}", 8, key, 2, false, &off);
    ck_assert_uint_le(off, 8);
    (void)jsonpos_find("{\"a\": [}}}, ,", 13, key, 2, false, &off);
    ck_assert_uint_le(off, 13);
}
END_TEST

START_TEST(test_jsonpos_member_after_utf8_counts_characters)
{
    /* 주 and 문 are three bytes each: the value is at byte 34 but character column 31. */
    const char *body = "{\"orderId\": \"\xec\xa3\xbc\xeb\xac\xb8-1\", \"amount\": 1000}";
    size_t off = SIZE_MAX;
    ck_assert(jsonpos_member(body, strlen(body), "amount", &off));
    ck_assert_uint_eq(off, offset_of(body, "1000"));
    ck_assert_uint_eq(off, 34);
    assert_line_col(body, off, 1, 31);

    /* jansson, stopping at a bad token in the same place, names the same column. */
    const char *bad = "{\"orderId\": \"\xec\xa3\xbc\xeb\xac\xb8-1\", \"amount\": @}";
    json_error_t je;
    ck_assert_ptr_null(json_loads(bad, 0, &je));
    size_t at = jsonpos_error_offset(bad, strlen(bad), &je);
    ck_assert_uint_eq(at, offset_of(bad, "@"));
    size_t line, col;
    jsonpos_line_col(bad, strlen(bad), at, &line, &col);
    ck_assert_int_eq(je.line, 1);
    ck_assert_int_eq(je.column, 31);
    ck_assert_uint_eq(line, (size_t)je.line);
    ck_assert_uint_eq(col, (size_t)je.column);
}
END_TEST

START_TEST(test_jsonpos_member_top_level_only)
{
    const char *body = "{\"card\": {\"amount\": 1}, \"amount\": [2], \"x\": \"amount\"}";
    size_t off = SIZE_MAX;
    ck_assert(jsonpos_member(body, strlen(body), "amount", &off));
    ck_assert_uint_eq(off, offset_of(body, "[2]"));
    ck_assert(!jsonpos_member(body, strlen(body), "card.amount", &off));
    ck_assert(!jsonpos_member(body, strlen(body), "missing", &off));
    ck_assert(!jsonpos_member(body, strlen(body), "amoun", &off)); /* not a prefix match */
    ck_assert_uint_eq(off, offset_of(body, "[2]"));                /* untouched by a miss */
    ck_assert(!jsonpos_member("[{\"amount\": 1}]", 15, "amount", &off));
    ck_assert(!jsonpos_member("", 0, "amount", &off));
}
END_TEST

START_TEST(test_jsonpos_escaped_keys)
{
    /* "am\u006funt" is "amount": a path finds it, a body member does not name a place for it. */
    const char *body = "{\"am\\u006funt\": 5, \"caf\\u00e9\": 6, \"\\ud83d\\ude00\": 7, "
                       "\"q\\\"t\": 8}";
    size_t off = SIZE_MAX;
    ck_assert(!jsonpos_member(body, strlen(body), "amount", &off));
    ck_assert_uint_eq(off, SIZE_MAX);
    struct jsonpos_step amount = {"amount", 0};
    ck_assert(jsonpos_find(body, strlen(body), &amount, 1, false, &off));
    ck_assert_uint_eq(off, offset_of(body, ": 5") + 2);
    struct jsonpos_step cafe = {"caf\xc3\xa9", 0};
    ck_assert(jsonpos_find(body, strlen(body), &cafe, 1, false, &off));
    ck_assert_uint_eq(off, offset_of(body, ": 6") + 2);
    struct jsonpos_step grin = {"\xf0\x9f\x98\x80", 0}; /* U+1F600 as a surrogate pair */
    ck_assert(jsonpos_find(body, strlen(body), &grin, 1, true, &off));
    ck_assert_uint_eq(off, offset_of(body, "\"\\ud83d"));
    struct jsonpos_step quote = {"q\"t", 0};
    ck_assert(jsonpos_find(body, strlen(body), &quote, 1, false, &off));
    ck_assert_uint_eq(off, offset_of(body, ": 8") + 2);
    /* The text parses, so the keys really are what the test says. */
    json_t *j = json_loads(body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_ptr_nonnull(json_object_get(j, "amount"));
    ck_assert_ptr_nonnull(json_object_get(j, "caf\xc3\xa9"));
    ck_assert_ptr_nonnull(json_object_get(j, "\xf0\x9f\x98\x80"));
    ck_assert_ptr_nonnull(json_object_get(j, "q\"t"));
    json_decref(j);
    /* jansson rejects a NUL in a key; a C string cannot hold one either, so "n" is not
     * "n\u0000", nor is an unpaired surrogate anything. */
    const char *odd = "{\"n\\u0000\": 1, \"\\ud83d\": 2, \"n\": 3}";
    struct jsonpos_step n = {"n", 0};
    ck_assert(jsonpos_find(odd, strlen(odd), &n, 1, false, &off));
    ck_assert_uint_eq(off, offset_of(odd, ": 3") + 2);
}
END_TEST

START_TEST(test_jsonpos_key_before_a_too_big_integer)
{
    const char *body = "{\"orderId\": \"a\",\n \"amount\" :\t 123456789012345678901234567890}";
    json_error_t je;
    ck_assert_ptr_null(json_loads(body, 0, &je));
    ck_assert_ptr_nonnull(strstr(je.text, "too big integer"));
    char key[16] = "unchanged";
    ck_assert(jsonpos_key_before(body, strlen(body), (size_t)je.position, key, sizeof key));
    ck_assert_str_eq(key, "amount");
    strcpy(key, "unchanged");
    ck_assert(jsonpos_key_before(body, strlen(body), (size_t)je.position - 1, key, sizeof key));
    ck_assert_str_eq(key, "amount");
    /* Too small a buffer, or no key before the number: false, out untouched. */
    char small[6] = "x";
    ck_assert(!jsonpos_key_before(body, strlen(body), (size_t)je.position, small, sizeof small));
    ck_assert_str_eq(small, "x");
    const char *arr = "[123456789012345678901234567890]";
    ck_assert(!jsonpos_key_before(arr, strlen(arr), strlen(arr) - 1, key, sizeof key));
    ck_assert(!jsonpos_key_before("\"a\" 1", 5, 5, key, sizeof key)); /* no ':' */
    ck_assert(!jsonpos_key_before("1: 2", 4, 4, key, sizeof key));     /* no key */
    ck_assert(!jsonpos_key_before("", 0, 0, key, sizeof key));
    ck_assert_str_eq(key, "amount");
}
END_TEST

START_TEST(test_jsonpos_crlf_line_ends)
{
    const char *text = "{\r\n  \"a\": 1,\r\n  \"b\": [true,\r\n\tfalse]\r\n}";
    struct jsonpos_step path[] = {{"b", 0}, {NULL, 1}};
    size_t off = SIZE_MAX;
    ck_assert(jsonpos_find(text, strlen(text), path, 2, false, &off));
    ck_assert_uint_eq(off, offset_of(text, "false"));
    assert_line_col(text, off, 4, 2);                          /* a tab is one column */
    assert_line_col(text, offset_of(text, "\"a\""), 2, 3);
    assert_line_col(text, offset_of(text, "\r"), 1, 2);        /* '\r' ends its own line */
    assert_line_col(text, offset_of(text, "\n"), 1, 3);
    assert_line_col(text, offset_of(text, "}"), 5, 1);
    /* jansson agrees on a bad token after CRLF and a tab. */
    const char *bad = "{\r\n\t\"a\": 1,\r\n\t\"b\": @}";
    json_error_t je;
    ck_assert_ptr_null(json_loads(bad, 0, &je));
    size_t line, col;
    jsonpos_line_col(bad, strlen(bad), jsonpos_error_offset(bad, strlen(bad), &je), &line, &col);
    ck_assert_uint_eq(line, 3);
    ck_assert_uint_eq(col, 7);
    ck_assert_int_eq(je.line, 3);
    ck_assert_int_eq(je.column, 7);
}
END_TEST

START_TEST(test_jsonpos_offsets_at_and_past_the_end)
{
    const char *text = "{\"a\": \"\xc3\xa9\"}"; /* 11 bytes, 10 characters */
    assert_line_col(text, 11, 1, 11);            /* just past the last character */
    assert_line_col(text, 12, 1, 11);            /* past len counts as len */
    assert_line_col(text, 1000, 1, 11);
    assert_line_col(text, 7, 1, 8);              /* é's first byte */
    assert_line_col(text, 8, 1, 8);              /* inside é: é's column */
    assert_line_col(text, 9, 1, 9);
    assert_line_col("", 0, 1, 1);
    assert_line_col("{}\n", 3, 2, 1);            /* after a final newline: the next line */
    assert_line_col("\n\n", 1, 2, 1);

    /* A premature end: jansson points at the end, and so does its offset. */
    const char *cut = "{\"a\": [1,\n 2";
    json_error_t je;
    ck_assert_ptr_null(json_loads(cut, 0, &je));
    size_t at = jsonpos_error_offset(cut, strlen(cut), &je);
    ck_assert_uint_eq(at, strlen(cut));
    assert_line_col(cut, at, 2, 3);
    /* A position past the text (a caller's mistake) is clamped. */
    json_error_t fake = {.position = 99};
    strcpy(fake.text, "x");
    ck_assert_uint_eq(jsonpos_error_offset(cut, strlen(cut), &fake), strlen(cut));
    fake.position = -1;
    ck_assert_uint_eq(jsonpos_error_offset(cut, strlen(cut), &fake), 0);
}
END_TEST

START_TEST(test_jsonpos_error_offset_is_the_quoted_tokens_start)
{
    const char *text = "{\"name\": \"x\"\n \"routes\": {}}"; /* a missing ',' */
    json_error_t je;
    ck_assert_ptr_null(json_loads(text, 0, &je));
    ck_assert_ptr_nonnull(strstr(je.text, "near '\"routes\"'"));
    size_t at = jsonpos_error_offset(text, strlen(text), &je);
    ck_assert_uint_eq(at, offset_of(text, "\"routes\""));
    assert_line_col(text, at, 2, 2);
    ck_assert_uint_eq((size_t)je.position, at + strlen("\"routes\""));
}
END_TEST

START_TEST(test_jsonpos_path_str)
{
    struct jsonpos_step path[] = {{"routes", 0}, {"confirm", 0}, {"faults", 0}, {NULL, 0},
                                  {"p", 0}};
    char buf[64];
    jsonpos_path_str(path, 5, buf, sizeof buf);
    ck_assert_str_eq(buf, "routes.confirm.faults[0].p");
    jsonpos_path_str(path + 3, 2, buf, sizeof buf);
    ck_assert_str_eq(buf, "[0].p");
    jsonpos_path_str(path, 0, buf, sizeof buf);
    ck_assert_str_eq(buf, "");
    char small[10];
    jsonpos_path_str(path, 5, small, sizeof small);
    ck_assert_str_eq(small, "routes.co");
    char one[1];
    jsonpos_path_str(path, 5, one, sizeof one);
    ck_assert_str_eq(one, "");
}
END_TEST

START_TEST(test_jsonpos_edit_distance_and_suggest)
{
    ck_assert_uint_eq(jsonpos_edit_distance("latncy", "latency"), 1);
    ck_assert_uint_eq(jsonpos_edit_distance("confrim", "confirm"), 2);
    ck_assert_uint_eq(jsonpos_edit_distance("", "abc"), 3);
    ck_assert_uint_eq(jsonpos_edit_distance("kitten", "sitting"), 3);
    ck_assert_uint_eq(jsonpos_edit_distance("same", "same"), 0);
    char long_key[66];
    memset(long_key, 'a', 65);
    long_key[65] = '\0';
    ck_assert_uint_eq(jsonpos_edit_distance(long_key, "a"), SIZE_MAX);
    ck_assert_uint_eq(jsonpos_edit_distance(long_key + 1, "a"), 63); /* 64 bytes: counted */

    static const char *const routes[] = {"confirm", "cancel", "read", "default", NULL};
    ck_assert_str_eq(jsonpos_suggest("confrim", routes), "confirm");
    ck_assert_str_eq(jsonpos_suggest("raed", routes), "read");
    ck_assert_ptr_null(jsonpos_suggest("colour", routes));
    static const char *const short_keys[] = {"p", "of", NULL};
    ck_assert_ptr_null(jsonpos_suggest("x", short_keys)); /* one edit, but all of "p" */
    ck_assert_str_eq(jsonpos_suggest("oof", short_keys), "of");
    static const char *const ties[] = {"ab", "ba", NULL};
    ck_assert_str_eq(jsonpos_suggest("aa", ties), "ab"); /* the first of the nearest */
}
END_TEST

/* `n` '[' then `n` ']' (caller frees). */
static char *nested_arrays(size_t n)
{
    char *t = malloc(2 * n + 1);
    ck_assert_ptr_nonnull(t);
    memset(t, '[', n);
    memset(t + n, ']', n);
    t[2 * n] = '\0';
    return t;
}

START_TEST(test_jsonpos_too_deep_counts_containers_and_points_at_the_first_too_deep)
{
    size_t off = 99;
    ck_assert(!jsonpos_too_deep("{}", 2, 1, &off));
    ck_assert(jsonpos_too_deep("{}", 2, 0, &off));
    ck_assert_uint_eq(off, 0);
    ck_assert(!jsonpos_too_deep("1", 1, 0, &off)); /* a scalar has no level */
    const char *t = "{\"a\": [1, {\"b\": [[2]]}], \"c\": {}}";
    ck_assert(!jsonpos_too_deep(t, strlen(t), 5, &off));
    ck_assert(jsonpos_too_deep(t, strlen(t), 4, &off));
    ck_assert_uint_eq(off, (size_t)(strstr(t, "[2]") - t)); /* the fifth level opens there */
    /* Siblings do not add up: closing brackets take levels back. */
    const char *wide = "[[1],[2],[3],{\"x\":[4]}]";
    ck_assert(!jsonpos_too_deep(wide, strlen(wide), 3, &off));
    ck_assert(jsonpos_too_deep(wide, strlen(wide), 2, &off));
    ck_assert_uint_eq(off, (size_t)(strstr(wide, "[4]") - wide));
    char *deep = nested_arrays(5000);
    ck_assert(!jsonpos_too_deep(deep, 10000, 5000, &off));
    ck_assert(jsonpos_too_deep(deep, 10000, 32, &off));
    ck_assert_uint_eq(off, 32);
    free(deep);
}
END_TEST

START_TEST(test_jsonpos_too_deep_ignores_brackets_in_strings_and_escapes)
{
    size_t off = 0;
    const char *in_str = "{\"k\": \"[[[[{{{{\", \"j\": \"]]]]\"}";
    ck_assert(!jsonpos_too_deep(in_str, strlen(in_str), 1, &off));
    /* An escaped quote does not end the string: the brackets after it are still in it. */
    const char *esc = "{\"k\": \"a\\\"[[[[\\\\\", \"n\": [1]}";
    ck_assert(!jsonpos_too_deep(esc, strlen(esc), 2, &off));
    ck_assert(jsonpos_too_deep(esc, strlen(esc), 1, &off));
    ck_assert_uint_eq(off, (size_t)(strstr(esc, "[1]") - esc));
    /* A key may hold brackets too. */
    const char *key = "{\"[[[\": {\"{{{\": 1}}";
    ck_assert(!jsonpos_too_deep(key, strlen(key), 2, &off));
    ck_assert(jsonpos_too_deep(key, strlen(key), 1, &off));
    /* Text a parser rejects: an unterminated string, a stray closer, a lone backslash at the
     * end -- an answer, nothing read past len. */
    ck_assert(!jsonpos_too_deep("[\"[[[[", 6, 1, &off));
    ck_assert(!jsonpos_too_deep("]]]][", 5, 1, &off));
    ck_assert(!jsonpos_too_deep("[\"\\", 3, 1, &off));
    ck_assert(jsonpos_too_deep("[[x", 2, 1, &off)); /* len cuts the text: only "[[" is read */
    ck_assert_uint_eq(off, 1);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("jsonpos");
    TCase *find = tcase_create("find");
    tcase_add_test(find, test_jsonpos_find_value_through_objects_and_arrays);
    tcase_add_test(find, test_jsonpos_find_missing_step_gives_the_container);
    tcase_add_test(find, test_jsonpos_find_stays_inside_text_jansson_rejects);
    tcase_add_test(find, test_jsonpos_member_after_utf8_counts_characters);
    tcase_add_test(find, test_jsonpos_member_top_level_only);
    tcase_add_test(find, test_jsonpos_escaped_keys);
    tcase_add_test(find, test_jsonpos_key_before_a_too_big_integer);
    suite_add_tcase(s, find);

    TCase *lines = tcase_create("lines");
    tcase_add_test(lines, test_jsonpos_crlf_line_ends);
    tcase_add_test(lines, test_jsonpos_offsets_at_and_past_the_end);
    tcase_add_test(lines, test_jsonpos_error_offset_is_the_quoted_tokens_start);
    tcase_add_test(lines, test_jsonpos_too_deep_counts_containers_and_points_at_the_first_too_deep);
    tcase_add_test(lines, test_jsonpos_too_deep_ignores_brackets_in_strings_and_escapes);
    suite_add_tcase(s, lines);

    TCase *msgs = tcase_create("messages");
    tcase_add_test(msgs, test_jsonpos_path_str);
    tcase_add_test(msgs, test_jsonpos_edit_distance_and_suggest);
    suite_add_tcase(s, msgs);
    return s;
}

