/* check_profile.c -- unit tests for profile.c: a valid profile becomes the right structs, and
 * every rejection names the exact origin:line:column of the offending key or value. Profiles are
 * written inline, one JSON line per C line, so a test's expected line:column can be read off it. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "profile.h"

/* Parses `text` as origin "t.json", expecting success. */
static struct profile *parse_ok(const char *text)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", NULL, NULL, &p, err);
    ck_assert_msg(rc == 0, "unexpected rejection: %s", err);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Parses `text` as origin "t.json", expecting rejection with exactly `want`. */
static void parse_fails_with(const char *text, const char *want)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", NULL, NULL, &p, err);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, want);
}

/* Same, but only the "t.json:line:column: " prefix is checked. */
static void parse_fails_at(const char *text, const char *want_prefix)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", NULL, NULL, &p, err);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(p);
    ck_assert_msg(strncmp(err, want_prefix, strlen(want_prefix)) == 0,
                  "got \"%s\", want prefix \"%s\"", err, want_prefix);
}

static bool near(double got, double want)
{
    return fabs(got - want) < 1e-9;
}

static const char FULL[] =
    "{\n"
    "  \"name\": \"full_example-1\",\n"
    "  \"description\": \"Every supported key.\",\n"
    "  \"seed\": 1234,\n"
    "  \"idempotency\": {\"on_body_mismatch\": \"reject\"},\n"
    "  \"routes\": {\n"
    "    \"confirm\": {\n"
    "      \"queue_latency\": {\"dist\": \"mixture\", \"of\": [\n"
    "        {\"weight\": 3, \"dist\": \"fixed\", \"ms\": 10},\n"
    "        {\"weight\": 1, \"dist\": \"exponential\", \"mean_ms\": 2000.5}\n"
    "      ]},\n"
    "      \"latency\": {\"dist\": \"lognormal\", \"median_ms\": 80, \"p99_ms\": 400}\n"
    "    },\n"
    "    \"cancel\": {\"latency\": {\"dist\": \"uniform\", \"min_ms\": 1.5, \"max_ms\": 9}},\n"
    "    \"default\": {\"latency\": {\"dist\": \"normal\", \"mean_ms\": 50, \"stddev_ms\": 5}}\n"
    "  }\n"
    "}\n";

START_TEST(test_profile_full_example_parses_into_right_values)
{
    struct profile *p = parse_ok(FULL);
    ck_assert_str_eq(p->name, "full_example-1");
    ck_assert_str_eq(p->description, "Every supported key.");
    ck_assert(p->has_seed);
    ck_assert_uint_eq(p->seed, 1234);
    ck_assert_int_eq(p->on_body_mismatch, BODY_MISMATCH_REJECT);

    const struct route_profile *c = &p->routes[ROUTE_CONFIRM];
    ck_assert(c->present);
    ck_assert_int_eq(c->queue_latency.kind, DIST_MIXTURE);
    ck_assert_uint_eq(c->queue_latency.n_parts, 2);
    ck_assert(near(c->queue_latency.parts[0].weight, 0.75));
    ck_assert(near(c->queue_latency.parts[1].weight, 0.25));
    ck_assert_int_eq(c->queue_latency.parts[0].dist.kind, DIST_FIXED);
    ck_assert(near(c->queue_latency.parts[0].dist.a, 10));
    ck_assert_int_eq(c->queue_latency.parts[1].dist.kind, DIST_EXPONENTIAL);
    ck_assert(near(c->queue_latency.parts[1].dist.a, 2000.5));
    ck_assert_int_eq(c->latency.kind, DIST_LOGNORMAL);
    ck_assert(near(c->latency.shown_a, 80));
    ck_assert(near(c->latency.shown_b, 400));
    ck_assert(near(c->latency.a, log(80)));

    const struct route_profile *k = &p->routes[ROUTE_CANCEL];
    ck_assert(k->present);
    ck_assert_int_eq(k->queue_latency.kind, DIST_NONE);
    ck_assert_int_eq(k->latency.kind, DIST_UNIFORM);
    ck_assert(near(k->latency.a, 1.5) && near(k->latency.b, 9));

    const struct route_profile *d = &p->routes[ROUTE_DEFAULT];
    ck_assert_int_eq(d->latency.kind, DIST_NORMAL);
    ck_assert(near(d->latency.a, 50) && near(d->latency.b, 5));
    ck_assert(near(d->latency.shown_a, 50) && near(d->latency.shown_b, 5));
    profile_free(p);
}
END_TEST

START_TEST(test_profile_absent_route_falls_back_to_default)
{
    struct profile *p = parse_ok(FULL);
    ck_assert(!p->routes[ROUTE_READ].present);
    ck_assert_ptr_eq(profile_route(p, ROUTE_READ), &p->routes[ROUTE_DEFAULT]);
    ck_assert_ptr_eq(profile_route(p, ROUTE_CONFIRM), &p->routes[ROUTE_CONFIRM]);
    ck_assert_ptr_eq(profile_route(p, ROUTE_CANCEL), &p->routes[ROUTE_CANCEL]);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_without_default_means_no_latency)
{
    struct profile *p = parse_ok("{\"name\": \"n\", \"routes\": {\"confirm\": {}}}");
    const struct route_profile *r = profile_route(p, ROUTE_READ);
    ck_assert(!r->present);
    ck_assert_int_eq(r->latency.kind, DIST_NONE);
    ck_assert_int_eq(r->queue_latency.kind, DIST_NONE);
    ck_assert(p->routes[ROUTE_CONFIRM].present);
    ck_assert_int_eq(p->routes[ROUTE_CONFIRM].latency.kind, DIST_NONE);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_minimal_gets_defaults)
{
    struct profile *p = parse_ok("{\"name\": \"minimal\", \"routes\": {}}");
    ck_assert_str_eq(p->name, "minimal");
    ck_assert_ptr_null(p->description);
    ck_assert(!p->has_seed);
    ck_assert_int_eq(p->on_body_mismatch, BODY_MISMATCH_REPLAY);
    for (int r = 0; r < ROUTE_COUNT; r++)
        ck_assert(!p->routes[r].present);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_fractional_and_real_durations_are_accepted)
{
    struct profile *p = parse_ok("{\"name\": \"f\", \"routes\": {\"read\": {\"latency\":"
                                 " {\"dist\": \"fixed\", \"ms\": 2.5},"
                                 " \"queue_latency\":"
                                 " {\"dist\": \"exponential\", \"mean_ms\": 1e3}}}}");
    ck_assert(near(p->routes[ROUTE_READ].latency.a, 2.5));
    ck_assert(near(p->routes[ROUTE_READ].queue_latency.a, 1000));
    profile_free(p);
}
END_TEST

START_TEST(test_profile_escaped_keys_are_matched_and_located)
{
    /* "rout\u0065s" is "routes": the locator must decode keys to find the bad value. */
    parse_fails_with("{\"name\": \"e\", \"rout\\u0065s\": {\"read\": {\"latency\":\n"
                     "  {\"dist\": \"fixed\", \"ms\": -1}}}}",
                     "t.json:2:27: routes.read.latency.ms: must not be negative");
}
END_TEST

/* The X-Fakegate-Fault path: one fault object, the same rules, messages from inside the fault
 * without a position; the same fault inside a profile file keeps its position and full path. */
START_TEST(test_profile_parse_fault_is_one_default_fault_with_positionless_messages)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    const char ok[] = "{\"kind\":\"drop_response\",\"how\":\"reset\",\"p\":0.5}";
    ck_assert_int_eq(profile_parse_fault(ok, strlen(ok), &p, err), 0);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(p->routes[ROUTE_DEFAULT].n_faults, 1);
    ck_assert_int_eq(p->routes[ROUTE_DEFAULT].faults[0].kind, FAULT_DROP_RESPONSE);
    ck_assert_int_eq(p->routes[ROUTE_DEFAULT].faults[0].how, HOW_RESET);
    ck_assert_double_eq(p->routes[ROUTE_DEFAULT].faults[0].p, 0.5);
    ck_assert(!p->routes[ROUTE_CONFIRM].present);
    profile_free(p);

    static const struct {
        const char *json, *want;
    } bad[] = {
        {"{\"kind\":\"drop_response\",\"how\":\"sideways\",\"p\":1}",
         "how: expected \"close\", \"reset\", \"hang\" or \"truncate\""},
        {"{\"kind\":\"error\",\"p\":1}", "missing \"code\""},
        {"{\"kind\":\"error\",\"code\":\"PROVIDER_ERROR\",\"attempts\":[1,0],\"p\":1}",
         "attempts[1]: expected a positive integer (an attempt number)"},
        {"{\"kind\":\"error\",\"code\":\"PROVIDER_ERROR\",\"p\":1,\"frob\":1}",
         "unknown key \"frob\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        p = (struct profile *)1;
        ck_assert_int_eq(profile_parse_fault(bad[i].json, strlen(bad[i].json), &p, err), -1);
        ck_assert_ptr_null(p);
        ck_assert_str_eq(err, bad[i].want);
    }
    ck_assert_int_eq(profile_parse_fault("{\"kind\":", 9, &p, err), -1);
    ck_assert_ptr_null(p);
    ck_assert_msg(strncmp(err, "invalid JSON: ", 14) == 0, "%s", err);

    parse_fails_with("{\"name\": \"x\", \"routes\": {\"default\": {\"faults\": [\n"
                     "  {\"kind\": \"drop_response\", \"how\": \"sideways\", \"p\": 1}]}}}",
                     "t.json:2:36: routes.default.faults[0].how: expected \"close\", \"reset\", "
                     "\"hang\" or \"truncate\"");
}
END_TEST

START_TEST(test_profile_typo_key_reports_line_and_column)
{
    parse_fails_with("{\n"
                     "  \"name\": \"x\",\n"
                     "  \"routes\": {\n"
                     "    \"confirm\": {\"latncy\": {\"dist\": \"fixed\", \"ms\": 5}}\n"
                     "  }\n"
                     "}\n",
                     "t.json:4:17: unknown key \"latncy\" (did you mean \"latency\"?)");
}
END_TEST

START_TEST(test_profile_unknown_key_far_from_any_gets_no_suggestion)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {},\n  \"colour\": \"blue\"}",
                     "t.json:2:3: unknown key \"colour\"");
}
END_TEST

START_TEST(test_profile_unknown_route_reports_key_position)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confrim\": {}}}",
                     "t.json:1:26: unknown route \"confrim\" (did you mean \"confirm\"?)");
}
END_TEST

START_TEST(test_profile_negative_latency_reports_value_position)
{
    parse_fails_with("{\"name\": \"x\",\n"
                     " \"routes\": {\"read\": {\"latency\": {\"dist\": \"fixed\",\n"
                     "    \"ms\": -5}}}}",
                     "t.json:3:11: routes.read.latency.ms: must not be negative");
}
END_TEST

START_TEST(test_profile_latency_over_one_day_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"read\": {\"queue_latency\":"
                     " {\"dist\": \"exponential\", \"mean_ms\": 86400001}}}}",
                     "t.json:1:87: routes.read.queue_latency.mean_ms: must be at most 86400000 ms"
                     " (one day)");
}
END_TEST

START_TEST(test_profile_wrong_type_reports_value_position)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"fixed\", \"ms\": \"5\"}}}}",
                     "t.json:2:27: routes.confirm.latency.ms: expected a number");
}
END_TEST

START_TEST(test_profile_route_not_an_object_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"cancel\": [1]}}",
                     "t.json:1:36: routes.cancel: expected an object");
}
END_TEST

START_TEST(test_profile_uniform_min_above_max_is_rejected_at_max)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"uniform\", \"min_ms\": 50, \"max_ms\": 10}}}}",
                     "t.json:2:47: routes.confirm.latency.max_ms: must not be less than min_ms"
                     " (10 < 50)");
}
END_TEST

START_TEST(test_profile_lognormal_p99_below_median_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"lognormal\", \"median_ms\": 100, \"p99_ms\": 40}}}}",
                     "t.json:2:53: routes.confirm.latency.p99_ms: must not be less than"
                     " median_ms (40 < 100)");
}
END_TEST

START_TEST(test_profile_lognormal_zero_median_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"lognormal\", \"median_ms\": 0, \"p99_ms\": 40}}}}",
                     "t.json:2:38: routes.confirm.latency.median_ms: must be greater than 0");
}
END_TEST

START_TEST(test_profile_bad_name_is_rejected_at_value)
{
    parse_fails_with("{\"name\": \"Bad Name\", \"routes\": {}}",
                     "t.json:1:10: name: \"Bad Name\" is not a valid name ([a-z0-9_-]{1,64})");
}
END_TEST

START_TEST(test_profile_name_validity_rules)
{
    ck_assert(profile_name_valid("a"));
    ck_assert(profile_name_valid("dawn-peak_2"));
    ck_assert(!profile_name_valid(""));
    ck_assert(!profile_name_valid("Slow"));
    ck_assert(!profile_name_valid("a b"));
    ck_assert(!profile_name_valid("a/b"));
    char n64[65], n65[66];
    memset(n64, 'a', 64);
    n64[64] = '\0';
    memset(n65, 'a', 65);
    n65[65] = '\0';
    ck_assert(profile_name_valid(n64));
    ck_assert(!profile_name_valid(n65));
}
END_TEST

START_TEST(test_profile_unknown_dist_is_rejected_at_value)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"gauss\", \"ms\": 5}}}}",
                     "t.json:2:12: routes.confirm.latency.dist: unknown dist \"gauss\" (expected"
                     " fixed, uniform, normal, lognormal, exponential or mixture)");
}
END_TEST

START_TEST(test_profile_dist_missing_is_rejected_at_object)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\":"
                     " {\"queue_latency\": {\"ms\": 5}}}}",
                     "t.json:1:55: routes.confirm.queue_latency: missing \"dist\"");
}
END_TEST

START_TEST(test_profile_key_of_other_dist_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":\n"
                     "  {\"dist\": \"fixed\", \"ms\": 5, \"min_ms\": 3}}}}",
                     "t.json:2:30: unknown key \"min_ms\"");
}
END_TEST

START_TEST(test_profile_empty_faults_array_is_no_faults)
{
    struct profile *p = parse_ok("{\"name\": \"x\", \"routes\": {\"confirm\": {\n"
                                 "  \"latency\": {\"dist\": \"fixed\", \"ms\": 5},\n"
                                 "  \"faults\": []}}}");
    ck_assert_uint_eq(p->routes[ROUTE_CONFIRM].n_faults, 0);
    ck_assert_ptr_null(p->routes[ROUTE_CONFIRM].faults);
    ck_assert_int_eq(p->routes[ROUTE_CONFIRM].throttle.kind, THROTTLE_NONE);
    ck_assert_uint_eq(p->routes[ROUTE_CONFIRM].concurrency.max_in_flight, 0);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_mixture_weights_are_normalised)
{
    struct profile *p = parse_ok("{\"name\": \"m\", \"routes\": {\"default\": {\"latency\":"
                                 " {\"dist\": \"mixture\", \"of\": ["
                                 "{\"weight\": 0.2, \"dist\": \"fixed\", \"ms\": 1},"
                                 "{\"weight\": 0.2, \"dist\": \"fixed\", \"ms\": 2},"
                                 "{\"weight\": 0.6, \"dist\": \"uniform\", \"min_ms\": 3,"
                                 " \"max_ms\": 4}]}}}}");
    const struct latency_dist *d = &p->routes[ROUTE_DEFAULT].latency;
    ck_assert_uint_eq(d->n_parts, 3);
    double sum = 0;
    for (size_t i = 0; i < d->n_parts; i++)
        sum += d->parts[i].weight;
    ck_assert(near(sum, 1));
    ck_assert(near(d->parts[2].weight, 0.6));
    ck_assert_int_eq(d->parts[2].dist.kind, DIST_UNIFORM);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_mixture_zero_weight_is_rejected_at_weight)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":"
                     " {\"dist\": \"mixture\", \"of\": [\n"
                     "  {\"weight\": 1, \"dist\": \"fixed\", \"ms\": 1},\n"
                     "  {\"weight\": 0, \"dist\": \"fixed\", \"ms\": 1}]}}}}",
                     "t.json:3:14: routes.confirm.latency.of[1].weight: must be a number greater"
                     " than 0");
}
END_TEST

START_TEST(test_profile_mixture_empty_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":"
                     " {\"dist\": \"mixture\", \"of\": []}}}}",
                     "t.json:1:75: routes.confirm.latency.of: a mixture needs at least one part");
}
END_TEST

START_TEST(test_profile_nested_mixture_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":"
                     " {\"dist\": \"mixture\", \"of\": [\n"
                     "  {\"weight\": 1, \"dist\": \"mixture\", \"of\": []}]}}}}",
                     "t.json:2:25: routes.confirm.latency.of[0].dist: a mixture cannot contain a"
                     " mixture");
}
END_TEST

START_TEST(test_profile_weight_outside_mixture_is_unknown_key)
{
    parse_fails_at("{\"name\": \"x\", \"routes\": {\"confirm\": {\"latency\":"
                   " {\"weight\": 1, \"dist\": \"fixed\", \"ms\": 1}}}}",
                   "t.json:1:50: unknown key \"weight\"");
}
END_TEST

START_TEST(test_profile_malformed_json_missing_comma_points_at_next_key)
{
    parse_fails_with("{\"name\": \"x\"\n"
                     " \"routes\": {}}",
                     "t.json:2:2: invalid JSON: ',' or '}' expected near '\"routes\"'");
}
END_TEST

START_TEST(test_profile_truncated_json_points_at_end)
{
    parse_fails_at("{\"name\": \"x\",\n \"routes\": {", "t.json:2:13: invalid JSON: ");
}
END_TEST

START_TEST(test_profile_duplicate_key_points_at_second_key)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {},\n"
                     "   \"name\": \"y\"}",
                     "t.json:2:4: duplicate key \"name\"");
}
END_TEST

START_TEST(test_profile_missing_name_is_rejected)
{
    parse_fails_with("{\"routes\": {}}", "t.json:1:1: missing required key \"name\"");
}
END_TEST

START_TEST(test_profile_missing_routes_is_rejected)
{
    parse_fails_with("\n  {\"name\": \"x\"}", "t.json:2:3: missing required key \"routes\"");
}
END_TEST

START_TEST(test_profile_non_object_top_level_is_rejected)
{
    parse_fails_with("\n [1, 2]", "t.json:2:2: a profile must be a JSON object");
    parse_fails_at("42", "t.json:1:1: invalid JSON: ");
    parse_fails_at("", "t.json:1:1: invalid JSON: ");
}
END_TEST

START_TEST(test_profile_bad_seed_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"seed\": -1, \"routes\": {}}",
                     "t.json:1:23: seed: expected a non-negative integer");
    parse_fails_at("{\"name\": \"x\", \"seed\": 1.5, \"routes\": {}}", "t.json:1:23: ");
}
END_TEST

START_TEST(test_profile_bad_on_body_mismatch_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"idempotency\": {\"on_body_mismatch\": \"ignore\"},"
                     " \"routes\": {}}",
                     "t.json:1:51: idempotency.on_body_mismatch: expected \"replay\" or"
                     " \"reject\"");
}
END_TEST

START_TEST(test_profile_columns_count_characters)
{
    /* "é" is two bytes but one character: "namex" is at byte column 26, character column 24. */
    parse_fails_with("{\"description\": \"h\xc3\xa9\xc3\xa9\", \"namex\": 1}",
                     "t.json:1:24: unknown key \"namex\" (did you mean \"name\"?)");
    /* Three-byte Hangul on an earlier line does not move a later line's column. */
    parse_fails_with("{\"description\": \"\xea\xb2\xb0\xec\xa0\x9c\",\n"
                     " \"routes\": {\"read\": {\"latency\": {\"dist\": \"fixed\", \"ms\": -1}}},\n"
                     " \"name\": \"x\"}",
                     "t.json:2:57: routes.read.latency.ms: must not be negative");
}
END_TEST

START_TEST(test_profile_semantic_and_syntax_errors_agree_on_a_column_after_utf8)
{
    /* The same place after "결제" (two characters, six bytes): an unknown key there, and a bad
     * token there. Both name character column 26 (byte column 30), as jansson does for the bad
     * token. */
    const char *semantic = "{\"description\": \"\xea\xb2\xb0\xec\xa0\x9c ok\", \"x\": 1}";
    const char *syntax = "{\"description\": \"\xea\xb2\xb0\xec\xa0\x9c ok\", @: 1}";
    parse_fails_with(semantic, "t.json:1:26: unknown key \"x\"");
    parse_fails_with(syntax, "t.json:1:26: invalid JSON: string or '}' expected near '@'");
    json_error_t je;
    ck_assert_ptr_null(json_loads(syntax, 0, &je));
    ck_assert_int_eq(je.line, 1);
    ck_assert_int_eq(je.column, 26);
}
END_TEST

START_TEST(test_profile_load_file_missing_gives_strerror)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN];
    ck_assert_int_eq(profile_load_file("/nonexistent/fakegate.json", NULL, NULL, &p, err), -1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, "/nonexistent/fakegate.json: No such file or directory");
}
END_TEST

START_TEST(test_profile_load_file_uses_path_as_origin)
{
    char path[] = "/tmp/check_profile_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"name\": \"x\",\n \"routes\": {\"read\": 1}}", f);
    fclose(f);

    struct profile *p = NULL;
    char err[ERR_LEN], want[ERR_LEN];
    ck_assert_int_eq(profile_load_file(path, NULL, NULL, &p, err), -1);
    snprintf(want, sizeof(want), "%s:2:21: routes.read: expected an object", path);
    ck_assert_str_eq(err, want);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(FULL, f);
    fclose(f);
    ck_assert_int_eq(profile_load_file(path, NULL, NULL, &p, err), 0);
    ck_assert_str_eq(p->name, "full_example-1");
    profile_free(p);
    unlink(path);
}
END_TEST

START_TEST(test_profile_load_file_over_one_mib_is_rejected)
{
    char path[] = "/tmp/check_profile_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 1024 * 1024 + 1; i++)
        fputc(' ', f);
    fclose(f);
    struct profile *p = NULL;
    char err[ERR_LEN], want[ERR_LEN];
    ck_assert_int_eq(profile_load_file(path, NULL, NULL, &p, err), -1);
    snprintf(want, sizeof(want), "%s: larger than 1048576 bytes, not a profile", path);
    ck_assert_str_eq(err, want);
    unlink(path);
}
END_TEST

START_TEST(test_route_names)
{
    ck_assert_str_eq(route_name(ROUTE_CONFIRM), "confirm");
    ck_assert_str_eq(route_name(ROUTE_CANCEL), "cancel");
    ck_assert_str_eq(route_name(ROUTE_READ), "read");
    ck_assert_str_eq(route_name(ROUTE_DEFAULT), "default");
    profile_free(NULL);
}
END_TEST

/* ---- Faults, throttle, concurrency ---------------------------------------------------------- */

/* The example of the original contract, verbatim (docs/profiles.md §4 shows a richer one). */
static const char SPEC_EXAMPLE[] =
    "{\n"
    "  \"name\": \"example\",\n"
    "  \"description\": \"Every feature at once, to show the syntax (not a shipped profile).\",\n"
    "  \"routes\": {\n"
    "    \"confirm\": {\n"
    "      \"latency\": {\"dist\": \"lognormal\", \"median_ms\": 80, \"p99_ms\": 400},\n"
    "      \"faults\": [\n"
    "        {\"kind\": \"drop_request\", \"p\": 0.1429, \"how\": \"hang\", \"hang_ms\": 30000},\n"
    "        {\"kind\": \"drop_response\", \"p\": 0.02, \"how\": \"reset\"},\n"
    "        {\"kind\": \"error\", \"p\": 0.01, \"status\": 500, \"code\":"
    " \"FAILED_INTERNAL_SYSTEM_PROCESSING\", \"commit\": false}\n"
    "      ],\n"
    "      \"throttle\": {\"kind\": \"token_bucket\", \"rate_per_s\": 200, \"burst\": 50,\n"
    "                   \"status\": 503, \"retry_after\": {\"format\": \"seconds\", \"value\": 1},"
    " \"body\": \"json\"},\n"
    "      \"concurrency\": {\"max_in_flight\": 40, \"status\": 503, \"code\":"
    " \"PROVIDER_ERROR\"}\n"
    "    },\n"
    "    \"default\": {\"latency\": {\"dist\": \"fixed\", \"ms\": 5}}\n"
    "  }\n"
    "}\n";

START_TEST(test_profile_spec_example_parses_with_every_value)
{
    struct profile *p = parse_ok(SPEC_EXAMPLE);
    ck_assert_str_eq(p->name, "example");
    ck_assert_str_eq(p->description,
                     "Every feature at once, to show the syntax (not a shipped profile).");
    ck_assert(!p->has_seed);
    ck_assert_ptr_null(p->phases);
    ck_assert_uint_eq(p->n_phases, 0);

    const struct route_profile *c = &p->routes[ROUTE_CONFIRM];
    ck_assert(c->present);
    ck_assert_int_eq(c->latency.kind, DIST_LOGNORMAL);
    ck_assert(near(c->latency.shown_a, 80) && near(c->latency.shown_b, 400));
    ck_assert_uint_eq(c->n_faults, 3);

    const struct fault *f = &c->faults[0];
    ck_assert_int_eq(f->kind, FAULT_DROP_REQUEST);
    ck_assert(near(f->p, 0.1429));
    ck_assert_int_eq(f->how, HOW_HANG);
    ck_assert(near(f->hang_ms, 30000));
    ck_assert_uint_eq(f->n_attempts, 0);
    ck_assert_ptr_null(f->attempts);
    ck_assert_int_eq(f->times, -1);

    f = &c->faults[1];
    ck_assert_int_eq(f->kind, FAULT_DROP_RESPONSE);
    ck_assert(near(f->p, 0.02));
    ck_assert_int_eq(f->how, HOW_RESET);
    ck_assert_int_eq(f->times, -1);

    f = &c->faults[2];
    ck_assert_int_eq(f->kind, FAULT_ERROR);
    ck_assert(near(f->p, 0.01));
    ck_assert_int_eq(f->status, 500);
    ck_assert_str_eq(f->code, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    ck_assert_ptr_null(f->message);
    ck_assert_int_eq(f->body, BODY_JSON);
    ck_assert(!f->commit);
    ck_assert(!f->when_before);
    ck_assert_int_eq(f->retry_after.format, RA_NONE);
    ck_assert_int_eq(f->times, -1);

    const struct throttle *t = &c->throttle;
    ck_assert_int_eq(t->kind, THROTTLE_TOKEN_BUCKET);
    ck_assert(near(t->rate_per_s, 200) && near(t->burst, 50));
    ck_assert_int_eq(t->status, 503);
    ck_assert_str_eq(t->code, "SERVICE_UNAVAILABLE");
    ck_assert_int_eq(t->retry_after.format, RA_SECONDS);
    ck_assert(!t->retry_after.is_auto);
    ck_assert_uint_eq(t->retry_after.seconds, 1);
    ck_assert_ptr_null(t->retry_after.raw);
    ck_assert_int_eq(t->body, BODY_JSON);

    ck_assert_uint_eq(c->concurrency.max_in_flight, 40);
    ck_assert_int_eq(c->concurrency.status, 503);
    ck_assert_str_eq(c->concurrency.code, "PROVIDER_ERROR");

    const struct route_profile *d = &p->routes[ROUTE_DEFAULT];
    ck_assert(d->present);
    ck_assert_int_eq(d->latency.kind, DIST_FIXED);
    ck_assert(near(d->latency.a, 5));
    ck_assert_uint_eq(d->n_faults, 0);
    ck_assert_int_eq(d->throttle.kind, THROTTLE_NONE);
    ck_assert_uint_eq(d->concurrency.max_in_flight, 0);
    ck_assert(!p->routes[ROUTE_CANCEL].present && !p->routes[ROUTE_READ].present);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_error_status_defaults_from_the_table)
{
    struct profile *p = parse_ok("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                                 " {\"kind\": \"error\", \"p\": 0.5,"
                                 " \"code\": \"PROVIDER_ERROR\"},\n"
                                 " {\"kind\": \"error\", \"p\": 0.5,"
                                 " \"code\": \"FAILED_INTERNAL_SYSTEM_PROCESSING\"}]}}}");
    const struct fault *f = p->routes[ROUTE_CONFIRM].faults;
    ck_assert_int_eq(f[0].status, 400);
    ck_assert_int_eq(f[1].status, 500);
    ck_assert_ptr_null(f[0].message);
    ck_assert_int_eq(f[0].body, BODY_JSON);
    ck_assert(!f[0].commit && !f[0].when_before);
    ck_assert_int_eq(f[0].retry_after.format, RA_NONE);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_error_fault_keeps_every_key)
{
    struct profile *p = parse_ok(
        "{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
        " {\"kind\": \"error\", \"p\": 0.25, \"status\": 502, \"code\": \"PROVIDER_ERROR\","
        " \"message\": \"upstream down\", \"body\": \"html\", \"commit\": true,"
        " \"when\": \"after\","
        " \"retry_after\": {\"format\": \"http-date\", \"value\": 7}},\n"
        " {\"kind\": \"error\", \"p\": 0.75, \"status\": 418, \"code\": \"MY_OWN_CODE\","
        " \"body\": \"empty\", \"when\": \"before\", \"retry_after\": {\"format\": \"none\"}}]}}}");
    const struct fault *f = p->routes[ROUTE_CONFIRM].faults;
    ck_assert_int_eq(f[0].status, 502);
    ck_assert_str_eq(f[0].code, "PROVIDER_ERROR");
    ck_assert_str_eq(f[0].message, "upstream down");
    ck_assert_int_eq(f[0].body, BODY_HTML);
    ck_assert(f[0].commit && !f[0].when_before);
    ck_assert_int_eq(f[0].retry_after.format, RA_HTTP_DATE);
    ck_assert(!f[0].retry_after.is_auto);
    ck_assert_uint_eq(f[0].retry_after.seconds, 7);
    ck_assert_int_eq(f[1].status, 418);
    ck_assert_str_eq(f[1].code, "MY_OWN_CODE");
    ck_assert_int_eq(f[1].body, BODY_EMPTY);
    ck_assert(!f[1].commit && f[1].when_before);
    ck_assert_int_eq(f[1].retry_after.format, RA_NONE);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_fault_attempts_times_and_hang_default)
{
    struct profile *p = parse_ok(
        "{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
        " {\"kind\": \"drop_response\", \"p\": 1, \"how\": \"hang\", \"attempts\": [1, 3],"
        " \"times\": 2}]},\n"
        " \"read\": {\"faults\": [{\"kind\": \"drip\", \"p\": 0.5, \"duration_ms\": 1500.5},\n"
        " {\"kind\": \"drop_request\", \"p\": 0.5, \"how\": \"close\", \"times\": 0}]}}}");
    const struct fault *f = &p->routes[ROUTE_CONFIRM].faults[0];
    ck_assert_int_eq(f->kind, FAULT_DROP_RESPONSE);
    ck_assert_int_eq(f->how, HOW_HANG);
    ck_assert(near(f->hang_ms, 30000));
    ck_assert_uint_eq(f->n_attempts, 2);
    ck_assert_uint_eq(f->attempts[0], 1);
    ck_assert_uint_eq(f->attempts[1], 3);
    ck_assert_int_eq(f->times, 2);
    const struct fault *r = p->routes[ROUTE_READ].faults;
    ck_assert_int_eq(r[0].kind, FAULT_DRIP);
    ck_assert(near(r[0].duration_ms, 1500.5));
    ck_assert_int_eq(r[0].times, -1);
    ck_assert_uint_eq(r[0].n_attempts, 0);
    ck_assert_int_eq(r[1].how, HOW_CLOSE);
    ck_assert_int_eq(r[1].times, 0);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_scripted_attempts_may_each_have_p_1)
{
    /* Eligible faults are drawn against per attempt, so p: 1 on attempts 1 and 2 is fine. */
    struct profile *p = parse_ok(
        "{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
        " {\"kind\": \"drop_request\", \"p\": 1, \"how\": \"reset\", \"attempts\": [1]},\n"
        " {\"kind\": \"error\", \"p\": 1, \"code\": \"PROVIDER_ERROR\", \"attempts\": [2]}]}}}");
    ck_assert_uint_eq(p->routes[ROUTE_CONFIRM].n_faults, 2);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_p_sum_over_one_points_at_the_tipping_fault)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.6, \"how\": \"reset\"},\n"
                     " {\"kind\": \"drop_response\", \"p\": 0.3, \"how\": \"reset\"},\n"
                     " {\"kind\": \"drip\", \"p\": 0.2, \"duration_ms\": 10}]}}}",
                     "t.json:4:24: routes.confirm.faults[2].p: the faults' p sum to 1.1, more"
                     " than 1");
}
END_TEST

START_TEST(test_profile_p_sum_is_checked_per_attempt)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 1, \"how\": \"reset\","
                     " \"attempts\": [1, 2]},\n"
                     " {\"kind\": \"drop_response\", \"p\": 0.5, \"how\": \"reset\","
                     " \"attempts\": [3, 2]}]}}}",
                     "t.json:3:33: routes.confirm.faults[1].p: the faults' p for attempt 2 sum"
                     " to 1.5, more than 1");
    /* A fault without attempts adds to every attempt's sum. */
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.9, \"how\": \"reset\","
                     " \"attempts\": [4]},\n"
                     " {\"kind\": \"drip\", \"p\": 0.2, \"duration_ms\": 10}]}}}",
                     "t.json:3:24: routes.confirm.faults[1].p: the faults' p for attempt 4 sum"
                     " to 1.1, more than 1");
}
END_TEST

START_TEST(test_profile_p_outside_zero_one_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 1.5, \"duration_ms\": 10}]}}}",
                     "t.json:2:24: routes.confirm.faults[0].p: expected a probability in [0, 1]");
    parse_fails_at("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                   " {\"kind\": \"drip\", \"p\": -0.1, \"duration_ms\": 10}]}}}",
                   "t.json:2:24: ");
    parse_fails_at("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                   " {\"kind\": \"drip\", \"p\": \"0.1\", \"duration_ms\": 10}]}}}",
                   "t.json:2:24: ");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"duration_ms\": 10}]}}}",
                     "t.json:2:2: routes.confirm.faults[0]: missing \"p\"");
}
END_TEST

START_TEST(test_profile_commit_with_when_before_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"PROVIDER_ERROR\",\n"
                     "  \"when\": \"before\", \"commit\": true}]}}}",
                     "t.json:3:31: commit: true is only valid with when: after");
}
END_TEST

START_TEST(test_profile_truncate_on_drop_request_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.1, \"how\": \"truncate\"}]}}}",
                     "t.json:2:44: routes.confirm.faults[0].how: truncate is only valid for"
                     " drop_response");
    struct profile *p = parse_ok("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                                 " {\"kind\": \"drop_response\", \"p\": 0.1,"
                                 " \"how\": \"truncate\"}]}}}");
    ck_assert_int_eq(p->routes[ROUTE_CONFIRM].faults[0].how, HOW_TRUNCATE);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_key_of_another_fault_kind_is_unknown)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"PROVIDER_ERROR\",\n"
                     "  \"hang_ms\": 5}]}}}",
                     "t.json:3:3: unknown key \"hang_ms\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 0.1, \"duration_ms\": 5,"
                     " \"how\": \"close\"}]}}}",
                     "t.json:2:47: unknown key \"how\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.1, \"how\": \"close\","
                     " \"hang_ms\": 5}]}}}",
                     "t.json:2:53: hang_ms is only valid with how: hang");
}
END_TEST

START_TEST(test_profile_bad_fault_kind_and_how_are_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"timeout\", \"p\": 0.1}]}}}",
                     "t.json:2:11: routes.confirm.faults[0].kind: expected \"error\","
                     " \"drop_request\", \"drop_response\" or \"drip\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"p\": 0.1}]}}}",
                     "t.json:2:2: routes.confirm.faults[0]: missing \"kind\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_response\", \"p\": 0.1, \"how\": \"rst\"}]}}}",
                     "t.json:2:45: routes.confirm.faults[0].how: expected \"close\", \"reset\","
                     " \"hang\" or \"truncate\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": {}}}}",
                     "t.json:1:48: routes.confirm.faults: expected an array of faults");
}
END_TEST

START_TEST(test_profile_bad_attempts_and_times_are_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 1, \"duration_ms\": 5, \"attempts\": []}]}}}",
                     "t.json:2:57: routes.confirm.faults[0].attempts: must not be empty (leave"
                     " it out to fire on every attempt)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 1, \"duration_ms\": 5,"
                     " \"attempts\": [1, 0]}]}}}",
                     "t.json:2:61: routes.confirm.faults[0].attempts[1]: expected a positive"
                     " integer (an attempt number)");
    parse_fails_at("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                   " {\"kind\": \"drip\", \"p\": 1, \"duration_ms\": 5, \"attempts\": [1.5]}]}}}",
                   "t.json:2:58: ");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 1, \"duration_ms\": 5,"
                     " \"attempts\": [2, 2]}]}}}",
                     "t.json:2:61: routes.confirm.faults[0].attempts[1]: attempt 2 is listed"
                     " twice");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 1, \"duration_ms\": 5, \"times\": -1}]}}}",
                     "t.json:2:54: routes.confirm.faults[0].times: expected a non-negative"
                     " integer");
}
END_TEST

START_TEST(test_profile_error_fault_code_and_status_are_validated)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"NO_SUCH_CODE\"}]}}}",
                     "t.json:2:38: routes.confirm.faults[0].code: \"NO_SUCH_CODE\" is not in the"
                     " error table, so \"status\" is required");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"provider_error\"}]}}}",
                     "t.json:2:38: routes.confirm.faults[0].code: expected an error code"
                     " ([A-Z0-9_]+)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1}]}}}",
                     "t.json:2:2: routes.confirm.faults[0]: missing \"code\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"PROVIDER_ERROR\","
                     " \"status\": 302}]}}}",
                     "t.json:2:66: routes.confirm.faults[0].status: expected an HTTP status in"
                     " 400..599");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"PROVIDER_ERROR\","
                     " \"when\": \"later\"}]}}}",
                     "t.json:2:64: routes.confirm.faults[0].when: expected \"after\" or"
                     " \"before\"");
}
END_TEST

START_TEST(test_profile_absurd_fault_durations_are_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.1, \"how\": \"hang\","
                     " \"hang_ms\": 86400001}]}}}",
                     "t.json:2:63: routes.confirm.faults[0].hang_ms: must be at most 86400000 ms"
                     " (one day)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drip\", \"p\": 0.1, \"duration_ms\": 0}]}}}",
                     "t.json:2:44: routes.confirm.faults[0].duration_ms: must be greater than 0");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"drop_request\", \"p\": 0.1, \"how\": \"hang\","
                     " \"hang_ms\": -1}]}}}",
                     "t.json:2:63: routes.confirm.faults[0].hang_ms: must not be negative");
}
END_TEST

START_TEST(test_profile_throttle_window_defaults)
{
    struct profile *p = parse_ok(
        "{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\": \"window\","
        " \"period_s\": 60, \"throttled_s\": 7.5}},\n"
        " \"cancel\": {\"throttle\": {\"kind\": \"token_bucket\", \"rate_per_s\": 0.5,"
        " \"burst\": 1, \"status\": 429, \"body\": \"html\"},"
        " \"concurrency\": {\"max_in_flight\": 1}}}}");
    const struct throttle *t = &p->routes[ROUTE_CONFIRM].throttle;
    ck_assert_int_eq(t->kind, THROTTLE_WINDOW);
    ck_assert(near(t->period_s, 60) && near(t->throttled_s, 7.5) && near(t->offset_s, 0));
    ck_assert_int_eq(t->status, 503);
    ck_assert_str_eq(t->code, "SERVICE_UNAVAILABLE");
    ck_assert_int_eq(t->retry_after.format, RA_SECONDS);
    ck_assert(t->retry_after.is_auto);
    ck_assert_int_eq(t->body, BODY_JSON);
    t = &p->routes[ROUTE_CANCEL].throttle;
    ck_assert_int_eq(t->kind, THROTTLE_TOKEN_BUCKET);
    ck_assert(near(t->rate_per_s, 0.5) && near(t->burst, 1));
    ck_assert_int_eq(t->status, 429);
    ck_assert_str_eq(t->code, "TOO_MANY_REQUESTS");
    ck_assert_int_eq(t->body, BODY_HTML);
    const struct concurrency *cc = &p->routes[ROUTE_CANCEL].concurrency;
    ck_assert_uint_eq(cc->max_in_flight, 1);
    ck_assert_int_eq(cc->status, 503);
    ck_assert_str_eq(cc->code, "SERVICE_UNAVAILABLE");
    profile_free(p);
}
END_TEST

START_TEST(test_profile_retry_after_forms)
{
    struct profile *p = parse_ok(
        "{\"name\": \"x\", \"routes\": {\n"
        " \"confirm\": {\"throttle\": {\"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 10,"
        " \"offset_s\": 2.5, \"code\": \"MY_CODE\","
        " \"retry_after\": {\"format\": \"seconds\", \"value\": 2147483647}}},\n"
        " \"cancel\": {\"throttle\": {\"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 1,"
        " \"retry_after\": {\"format\": \"raw\", \"value\": \"1.5\"}}},\n"
        " \"read\": {\"throttle\": {\"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 1,"
        " \"retry_after\": {\"format\": \"http-date\", \"value\": \"auto\"}}},\n"
        " \"default\": {\"throttle\": {\"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 1,"
        " \"retry_after\": {\"format\": \"none\"}}}}}");
    const struct throttle *t = &p->routes[ROUTE_CONFIRM].throttle;
    ck_assert(near(t->offset_s, 2.5));
    ck_assert_str_eq(t->code, "MY_CODE");
    ck_assert_int_eq(t->retry_after.format, RA_SECONDS);
    ck_assert(!t->retry_after.is_auto);
    ck_assert_uint_eq(t->retry_after.seconds, 2147483647u);
    t = &p->routes[ROUTE_CANCEL].throttle;
    ck_assert_int_eq(t->retry_after.format, RA_RAW);
    ck_assert_str_eq(t->retry_after.raw, "1.5");
    t = &p->routes[ROUTE_READ].throttle;
    ck_assert_int_eq(t->retry_after.format, RA_HTTP_DATE);
    ck_assert(t->retry_after.is_auto);
    ck_assert_int_eq(p->routes[ROUTE_DEFAULT].throttle.retry_after.format, RA_NONE);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_retry_after_above_int32_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\",\n"
                     " \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"format\": \"seconds\", \"value\": 2147483648}}}}}",
                     "t.json:3:48: routes.confirm.throttle.retry_after.value: Retry-After above"
                     " 2^31-1");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"faults\": [\n"
                     " {\"kind\": \"error\", \"p\": 0.1, \"code\": \"PROVIDER_ERROR\",\n"
                     "  \"retry_after\": {\"format\": \"seconds\", \"value\": 1.5}}]}}}",
                     "t.json:3:49: routes.confirm.faults[0].retry_after.value: expected whole"
                     " seconds (0..2147483647) or \"auto\" (format \"raw\" sends anything else)");
}
END_TEST

START_TEST(test_profile_bad_retry_after_objects_are_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\", \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"format\": \"raw\", \"value\": \"1\\r\\nX: y\"}}}}}",
                     "t.json:2:44: routes.confirm.throttle.retry_after.value: must be printable"
                     " ASCII (no CR, LF or control bytes)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\", \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"format\": \"raw\"}}}}}",
                     "t.json:2:17: routes.confirm.throttle.retry_after: missing \"value\" (the"
                     " header's bytes)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\", \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"format\": \"none\", \"value\": 3}}}}}",
                     "t.json:2:36: format \"none\" sends no header and takes no value");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\", \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"value\": 3}}}}}",
                     "t.json:2:17: routes.confirm.throttle.retry_after: missing \"format\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\"kind\":"
                     " \"window\", \"period_s\": 10, \"throttled_s\": 1,\n"
                     " \"retry_after\": {\"format\": \"seconds\", \"vlaue\": 3}}}}}",
                     "t.json:2:39: unknown key \"vlaue\" (did you mean \"value\"?)");
}
END_TEST

START_TEST(test_profile_throttle_status_500_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"token_bucket\", \"rate_per_s\": 1, \"burst\": 1,"
                     " \"status\": 500}}}}",
                     "t.json:2:66: routes.confirm.throttle.status: expected 503 or 429");
}
END_TEST

START_TEST(test_profile_bad_throttle_values_are_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"token_bucket\", \"rate_per_s\": 0, \"burst\": 1}}}}",
                     "t.json:2:41: routes.confirm.throttle.rate_per_s: must be greater than 0");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"token_bucket\", \"rate_per_s\": 1, \"burst\": 0.5}}}}",
                     "t.json:2:53: routes.confirm.throttle.burst: must be at least 1");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 11}}}}",
                     "t.json:2:52: routes.confirm.throttle.throttled_s: must not be more than"
                     " period_s (11 > 10)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"window\", \"period_s\": 86401, \"throttled_s\": 1}}}}",
                     "t.json:2:33: routes.confirm.throttle.period_s: must be at most 86400 s"
                     " (one day)");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 1,"
                     " \"offset_s\": -1}}}}",
                     "t.json:2:67: routes.confirm.throttle.offset_s: must not be negative");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"window\", \"period_s\": 10, \"throttled_s\": 1,"
                     " \"rate_per_s\": 1}}}}",
                     "t.json:2:55: unknown key \"rate_per_s\"");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"throttle\": {\n"
                     "  \"kind\": \"leaky_bucket\"}}}}",
                     "t.json:2:11: routes.confirm.throttle.kind: expected \"token_bucket\" or"
                     " \"window\"");
}
END_TEST

START_TEST(test_profile_bad_concurrency_is_rejected)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"concurrency\":\n"
                     "  {\"max_in_flight\": 0}}}}",
                     "t.json:2:21: routes.confirm.concurrency.max_in_flight: expected a positive"
                     " integer");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"concurrency\":\n"
                     "  {\"max_in_flight\": 5, \"status\": 302}}}}",
                     "t.json:2:34: routes.confirm.concurrency.status: expected an HTTP status in"
                     " 400..599");
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\"concurrency\":\n"
                     "  {\"status\": 503}}}}",
                     "t.json:2:3: routes.confirm.concurrency: missing \"max_in_flight\"");
}
END_TEST

/* ---- Schedules ------------------------------------------------------------------------------ */

/* Knows "normal" (a plain profile), "hooks" (one with webhooks) and "dawn" (a schedule); anything
 * else is missing. "self" is a schedule naming itself, parsed with this resolver again (the
 * recursion guard's test). */
static int test_resolve(const char *name, struct profile **out, char err[ERR_LEN], void *ctx)
{
    int *calls = ctx;
    (*calls)++;
    const char *text = NULL;
    if (strcmp(name, "normal") == 0)
        text = "{\"name\": \"normal\", \"routes\": {\"default\": {\"latency\":"
               " {\"dist\": \"fixed\", \"ms\": 5}}}}";
    else if (strcmp(name, "dawn") == 0)
        text = "{\"name\": \"dawn\", \"schedule\": [{\"for_s\": 1, \"profile\":"
               " {\"name\": \"a\", \"routes\": {}}}]}";
    else if (strcmp(name, "hooks") == 0)
        text = "{\"name\": \"hooks\", \"routes\": {}, \"webhooks\": {\"duplicate\":"
               " {\"p\": 1, \"after\": {\"dist\": \"exponential\", \"mean_ms\": 250}}}}";
    else if (strcmp(name, "self") == 0)
        text = "{\"name\": \"self\", \"schedule\": [{\"for_s\": 1, \"profile\": \"self\"}]}";
    if (text == NULL) {
        snprintf(err, ERR_LEN, "no profile \"%s\" (looked in test/)", name);
        return -1;
    }
    return profile_parse(text, strlen(text), name, test_resolve, ctx, out, err);
}

static void schedule_fails_with(const char *text, const char *want)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    int calls = 0;
    int rc = profile_parse(text, strlen(text), "t.json", test_resolve, &calls, &p, err);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, want);
}

START_TEST(test_profile_schedule_with_inline_and_named_phases)
{
    static const char text[] =
        "{\"name\": \"flapping\", \"seed\": 7, \"repeat\": true, \"schedule\": [\n"
        "  {\"for_s\": 30, \"profile\": \"normal\"},\n"
        "  {\"for_s\": 10.5, \"profile\": {\"name\": \"down\", \"routes\": {\"confirm\":"
        " {\"faults\": [{\"kind\": \"error\", \"p\": 1, \"code\": \"PROVIDER_ERROR\"}]}}}}\n"
        "]}";
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int calls = 0;
    ck_assert_msg(profile_parse(text, strlen(text), "t.json", test_resolve, &calls, &p, err) == 0,
                  "unexpected rejection: %s", err);
    ck_assert_int_eq(calls, 1);
    ck_assert_str_eq(p->name, "flapping");
    ck_assert(p->has_seed);
    ck_assert_uint_eq(p->seed, 7);
    ck_assert(p->repeat);
    ck_assert_uint_eq(p->n_phases, 2);
    ck_assert(near(p->phases[0].for_s, 30));
    ck_assert_str_eq(p->phases[0].profile->name, "normal");
    ck_assert(near(p->phases[0].profile->routes[ROUTE_DEFAULT].latency.a, 5));
    ck_assert(near(p->phases[1].for_s, 10.5));
    ck_assert_str_eq(p->phases[1].profile->name, "down");
    ck_assert_ptr_null(p->phases[1].profile->phases);
    ck_assert_int_eq(p->phases[1].profile->routes[ROUTE_CONFIRM].faults[0].status, 400);
    for (int r = 0; r < ROUTE_COUNT; r++)
        ck_assert(!p->routes[r].present);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_schedule_repeat_defaults_to_false)
{
    static const char text[] =
        "{\"name\": \"once\", \"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}]}";
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int calls = 0;
    ck_assert_int_eq(profile_parse(text, strlen(text), "t.json", test_resolve, &calls, &p, err),
                     0);
    ck_assert(!p->repeat);
    ck_assert_uint_eq(p->n_phases, 1);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_schedule_unknown_phase_name_is_rejected_at_its_value)
{
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 30, \"profile\": \"normal\"},\n"
                        "  {\"for_s\": 10, \"profile\": \"outgae\"}]}",
                        "t.json:3:28: schedule[1].profile: no profile \"outgae\" (looked in"
                        " test/)");
}
END_TEST

START_TEST(test_profile_schedule_by_name_without_resolver_is_rejected)
{
    parse_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                     "  {\"for_s\": 30, \"profile\": \"normal\"}]}",
                     "t.json:2:28: schedule[0].profile: schedule phases by name need a profiles"
                     " directory");
}
END_TEST

START_TEST(test_profile_nested_schedule_is_rejected)
{
    /* Inline. */
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 30, \"profile\": {\"name\": \"t\",\n"
                        "     \"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}]}}]}",
                        "t.json:3:6: schedule[0].profile.schedule: a schedule phase cannot itself"
                        " be a schedule");
    /* By name: the resolver loads a schedule. */
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 30, \"profile\": \"dawn\"}]}",
                        "t.json:2:28: schedule[0].profile: dawn:1:18: schedule: a schedule phase"
                        " cannot itself be a schedule");
    /* A schedule naming itself stops at the second level instead of recursing. */
    schedule_fails_with("{\"name\": \"self\", \"schedule\": [\n"
                        "  {\"for_s\": 30, \"profile\": \"self\"}]}",
                        "t.json:2:28: schedule[0].profile: self:1:18: schedule: a schedule phase"
                        " cannot itself be a schedule");
}
END_TEST

START_TEST(test_profile_schedule_shape_is_validated)
{
    schedule_fails_with("{\"name\": \"s\", \"routes\": {},\n \"schedule\": []}",
                        "t.json:2:2: schedule: a profile has either \"routes\" or \"schedule\","
                        " not both");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": []}",
                        "t.json:1:27: schedule: a schedule needs at least one phase");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 0, \"profile\": \"normal\"}]}",
                        "t.json:2:13: schedule[0].for_s: must be greater than 0");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 86401, \"profile\": \"normal\"}]}",
                        "t.json:2:13: schedule[0].for_s: must be at most 86400 s (one day)");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": \"../etc/passwd\"}]}",
                        "t.json:2:27: schedule[0].profile: \"../etc/passwd\" is not a valid name"
                        " ([a-z0-9_-]{1,64})");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": 3}]}",
                        "t.json:2:27: schedule[0].profile: expected a profile name or an inline"
                        " profile object");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1}]}",
                        "t.json:2:3: schedule[0]: missing \"profile\"");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": \"normal\", \"repeat\": true}]}",
                        "t.json:2:37: unknown key \"repeat\"");
    schedule_fails_with("{\"name\": \"s\", \"routes\": {},\n \"repeat\": true}",
                        "t.json:2:2: repeat: only a schedule can repeat");
    schedule_fails_with("{\"name\": \"s\","
                        " \"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}],\n"
                        " \"idempotency\": {\"on_body_mismatch\": \"reject\"}}",
                        "t.json:2:2: idempotency: a schedule takes \"idempotency\" from its"
                        " phases' profiles");
    schedule_fails_with("{\"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}]}",
                        "t.json:1:1: missing required key \"name\"");
}
END_TEST

START_TEST(test_profile_inline_phase_errors_are_located_inside_it)
{
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": {\"name\": \"a\","
                        " \"routes\": {\"confirm\":\n"
                        "    {\"faults\": [{\"kind\": \"drip\", \"p\": 2,"
                        " \"duration_ms\": 1}]}}}}]}",
                        "t.json:3:39: schedule[0].profile.routes.confirm.faults[0].p: expected a"
                        " probability in [0, 1]");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": {\"routes\": {}}}]}",
                        "t.json:2:27: schedule[0].profile: missing required key \"name\"");
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": {\"name\": \"a\"}}]}",
                        "t.json:2:27: schedule[0].profile: missing required key \"routes\"");
}
END_TEST

/* A window whose open part no whole second can reach: refused with an auto Retry-After (it
 * would lie), accepted when the profile says what to send itself. */
START_TEST(test_profile_unreachable_window_needs_an_explicit_retry_after)
{
    parse_fails_at("{\"name\":\"w\",\"routes\":{\"confirm\":{\"throttle\":{\"kind\":\"window\","
                   "\"period_s\":1,\"throttled_s\":0.6}}}}",
                   "t.json:1:73: routes.confirm.throttle.period_s: no whole-second Retry-After");
    const char *fmts[] = {"{\"format\":\"none\"}", "{\"format\":\"seconds\",\"value\":1}",
                          "{\"format\":\"raw\",\"value\":\"0.4\"}"};
    for (int i = 0; i < 3; i++) {
        char text[256];
        snprintf(text, sizeof text,
                 "{\"name\":\"w\",\"routes\":{\"confirm\":{\"throttle\":{\"kind\":\"window\","
                 "\"period_s\":1,\"throttled_s\":0.6,\"retry_after\":%s}}}}",
                 fmts[i]);
        profile_free(parse_ok(text));
    }
}
END_TEST

/* ---- Webhooks ------------------------------------------------------------------------------- */

/* The section as docs/profiles.md §4 shows it. */
static const char WEBHOOKS_EXAMPLE[] =
    "{\"name\": \"hooks\", \"routes\": {},\n"
    " \"webhooks\": {\"delay\": {\"dist\": \"uniform\", \"min_ms\": 0, \"max_ms\": 3000},\n"
    "              \"duplicate\": {\"p\": 0.1, \"after\": {\"dist\": \"fixed\", \"ms\": 500}},\n"
    "              \"drop\": {\"p\": 0.05}}}\n";

static void assert_no_webhook_faults(const struct webhook_faults *w)
{
    ck_assert_int_eq(w->delay.kind, DIST_NONE);
    ck_assert_double_eq(w->duplicate_p, 0);
    ck_assert_int_eq(w->duplicate_after.kind, DIST_NONE);
    ck_assert_double_eq(w->drop_p, 0);
}

START_TEST(test_profile_webhooks_example_parses_with_exact_values)
{
    struct profile *p = parse_ok(WEBHOOKS_EXAMPLE);
    const struct webhook_faults *w = &p->webhooks;
    ck_assert_int_eq(w->delay.kind, DIST_UNIFORM);
    ck_assert_double_eq(w->delay.a, 0);
    ck_assert_double_eq(w->delay.b, 3000);
    ck_assert_double_eq(w->duplicate_p, 0.1);
    ck_assert_int_eq(w->duplicate_after.kind, DIST_FIXED);
    ck_assert_double_eq(w->duplicate_after.a, 500);
    ck_assert_double_eq(w->drop_p, 0.05);
    /* GET /__admin/profile shows `source`: the section is kept as written, in order. */
    ck_assert_str_eq(p->source,
                     "{\"name\":\"hooks\",\"routes\":{},\"webhooks\":{\"delay\":{\"dist\":"
                     "\"uniform\",\"min_ms\":0,\"max_ms\":3000},\"duplicate\":{\"p\":0.1,"
                     "\"after\":{\"dist\":\"fixed\",\"ms\":500}},\"drop\":{\"p\":0.05}}}");
    profile_free(p);
}
END_TEST

START_TEST(test_profile_without_webhooks_has_no_webhook_faults)
{
    struct profile *p = parse_ok("{\"name\": \"w\", \"routes\": {}}");
    assert_no_webhook_faults(&p->webhooks);
    profile_free(p);
    p = parse_ok("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {}}");
    assert_no_webhook_faults(&p->webhooks);
    profile_free(p);
    /* Each part alone leaves the others at zero; p may be 0 or 1. */
    p = parse_ok("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\": {\"p\": 1}}}");
    ck_assert_double_eq(p->webhooks.drop_p, 1);
    ck_assert_double_eq(p->webhooks.duplicate_p, 0);
    ck_assert_int_eq(p->webhooks.delay.kind, DIST_NONE);
    profile_free(p);
    p = parse_ok("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\": {\"p\": 0}}}");
    assert_no_webhook_faults(&p->webhooks);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_webhooks_delay_takes_any_latency_dist)
{
    struct profile *p = parse_ok(
        "{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\n"
        "  \"delay\": {\"dist\": \"mixture\", \"of\": [\n"
        "    {\"weight\": 3, \"dist\": \"fixed\", \"ms\": 10},\n"
        "    {\"weight\": 1, \"dist\": \"lognormal\", \"median_ms\": 80, \"p99_ms\": 400}]},\n"
        "  \"duplicate\": {\"p\": 0.5}}}");
    const struct webhook_faults *w = &p->webhooks;
    ck_assert_int_eq(w->delay.kind, DIST_MIXTURE);
    ck_assert_uint_eq(w->delay.n_parts, 2);
    ck_assert(near(w->delay.parts[0].weight, 0.75) && near(w->delay.parts[1].weight, 0.25));
    ck_assert_int_eq(w->delay.parts[0].dist.kind, DIST_FIXED);
    ck_assert_double_eq(w->delay.parts[0].dist.a, 10);
    ck_assert_int_eq(w->delay.parts[1].dist.kind, DIST_LOGNORMAL);
    ck_assert(near(w->delay.parts[1].dist.shown_a, 80));
    ck_assert(near(w->delay.parts[1].dist.shown_b, 400));
    ck_assert_double_eq(w->duplicate_p, 0.5);
    ck_assert_int_eq(w->duplicate_after.kind, DIST_NONE); /* the duplicate goes at once */
    ck_assert_double_eq(w->drop_p, 0);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_webhooks_unknown_keys_are_rejected_at_the_key)
{
    parse_fails_with("{\"name\": \"w\", \"routes\": {},\n"
                     " \"webhooks\": {\"delay\": {\"dist\": \"fixed\", \"ms\": 5},\n"
                     "   \"dealy\": {\"dist\": \"fixed\", \"ms\": 5}}}",
                     "t.json:3:4: unknown key \"dealy\" (did you mean \"delay\"?)");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\n"
                     "  \"retry\": {\"p\": 0.1}}}",
                     "t.json:2:3: unknown key \"retry\"");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\":"
                     " {\"p\": 0.1,\n"
                     "  \"aftr\": {\"dist\": \"fixed\", \"ms\": 5}}}}",
                     "t.json:2:3: unknown key \"aftr\" (did you mean \"after\"?)");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\": {\"p\": 0.1,\n"
                     "  \"after\": {\"dist\": \"fixed\", \"ms\": 5}}}}",
                     "t.json:2:3: unknown key \"after\"");
    /* "webhook" is one edit from the top-level key. */
    parse_fails_with("{\"name\": \"w\", \"routes\": {},\n"
                     "  \"webhook\": {}}",
                     "t.json:2:3: unknown key \"webhook\" (did you mean \"webhooks\"?)");
}
END_TEST

START_TEST(test_profile_webhooks_p_outside_zero_one_is_rejected)
{
    static const char *const parts[] = {"drop", "duplicate"};
    static const char *const values[] = {"-0.1", "1.5", "1.0000001"};
    for (size_t i = 0; i < 2; i++) {
        for (size_t j = 0; j < 3; j++) {
            char text[256], want[ERR_LEN];
            snprintf(text, sizeof text,
                     "{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"%s\":\n"
                     "  {\"p\": %s}}}",
                     parts[i], values[j]);
            snprintf(want, sizeof want,
                     "t.json:2:9: webhooks.%s.p: expected a probability in [0, 1]", parts[i]);
            parse_fails_with(text, want);
        }
    }
}
END_TEST

START_TEST(test_profile_webhooks_wrong_types_are_rejected_at_the_value)
{
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\":\n"
                     "  {\"p\": \"0.1\"}}}",
                     "t.json:2:9: webhooks.drop.p: expected a probability in [0, 1]");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\":\n"
                     "  {\"p\": true}}}",
                     "t.json:2:9: webhooks.duplicate.p: expected a probability in [0, 1]");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\":\n"
                     "  0.05}}",
                     "t.json:2:3: webhooks.drop: expected an object {\"p\": ...}");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\":\n"
                     "  [0.1]}}",
                     "t.json:2:3: webhooks.duplicate: expected an object {\"p\": ..., \"after\":"
                     " ...}");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"delay\":\n"
                     "  500}}",
                     "t.json:2:3: webhooks.delay: expected an object");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\":\n"
                     "  [1]}",
                     "t.json:2:3: webhooks: expected an object");
}
END_TEST

START_TEST(test_profile_webhooks_missing_p_is_rejected_at_the_object)
{
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\":\n"
                     "  {}}}",
                     "t.json:2:3: webhooks.drop: missing \"p\"");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\":\n"
                     "  {\"after\": {\"dist\": \"fixed\", \"ms\": 5}}}}",
                     "t.json:2:3: webhooks.duplicate: missing \"p\"");
}
END_TEST

START_TEST(test_profile_webhooks_p_sum_over_one_points_at_the_later_p)
{
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\n"
                     "  \"drop\": {\"p\": 0.7},\n"
                     "  \"duplicate\": {\"p\": 0.5, \"after\": {\"dist\": \"fixed\", \"ms\": 1}}}}",
                     "t.json:3:22: webhooks.duplicate.p: drop.p + duplicate.p = 1.2: one draw"
                     " decides, so they must sum to <= 1");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\n"
                     "  \"duplicate\": {\"p\": 0.5},\n"
                     "  \"delay\": {\"dist\": \"fixed\", \"ms\": 1},\n"
                     "  \"drop\": {\"p\": 0.7}}}",
                     "t.json:4:17: webhooks.drop.p: drop.p + duplicate.p = 1.2: one draw decides,"
                     " so they must sum to <= 1");
    /* Just over 1 is shown as it is, not rounded to "1". */
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"drop\": {\"p\": 0.7},\n"
                     "  \"duplicate\": {\"p\": 0.3000001}}}",
                     "t.json:2:22: webhooks.duplicate.p: drop.p + duplicate.p = 1.0000001: one"
                     " draw decides, so they must sum to <= 1");
    /* A sum of exactly 1 is allowed, and so is one within the 1e-9 slack. */
    struct profile *p = parse_ok("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {"
                                 "\"drop\": {\"p\": 0.7}, \"duplicate\": {\"p\": 0.3}}}");
    ck_assert_double_eq(p->webhooks.drop_p, 0.7);
    ck_assert_double_eq(p->webhooks.duplicate_p, 0.3);
    profile_free(p);
    p = parse_ok("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {"
                 "\"duplicate\": {\"p\": 0.3000000001}, \"drop\": {\"p\": 0.7}}}");
    ck_assert_double_eq(p->webhooks.duplicate_p, 0.3000000001);
    profile_free(p);
}
END_TEST

START_TEST(test_profile_webhooks_bad_dists_are_rejected_like_a_latency)
{
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"delay\":\n"
                     "  {\"dist\": \"gauss\", \"ms\": 5}}}",
                     "t.json:2:12: webhooks.delay.dist: unknown dist \"gauss\" (expected fixed,"
                     " uniform, normal, lognormal, exponential or mixture)");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"delay\":\n"
                     "  {\"dist\": \"uniform\", \"min_ms\": 50, \"max_ms\": 10}}}",
                     "t.json:2:47: webhooks.delay.max_ms: must not be less than min_ms"
                     " (10 < 50)");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\": {\"p\": 0.1,"
                     " \"after\":\n"
                     "  {\"ms\": 5}}}}",
                     "t.json:2:3: webhooks.duplicate.after: missing \"dist\"");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\": {\"p\": 0.1,"
                     " \"after\":\n"
                     "  {\"dist\": \"fixed\", \"ms\": -5}}}}",
                     "t.json:2:27: webhooks.duplicate.after.ms: must not be negative");
    parse_fails_with("{\"name\": \"w\", \"routes\": {}, \"webhooks\": {\"duplicate\": {\"p\": 0.1,"
                     " \"after\": {\"dist\": \"mixture\", \"of\": [\n"
                     "  {\"weight\": 1, \"dist\": \"mixture\", \"of\": []}]}}}}",
                     "t.json:2:25: webhooks.duplicate.after.of[0].dist: a mixture cannot contain"
                     " a mixture");
}
END_TEST

START_TEST(test_profile_schedule_top_level_webhooks_is_rejected)
{
    schedule_fails_with("{\"name\": \"s\","
                        " \"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}],\n"
                        " \"webhooks\": {\"drop\": {\"p\": 0.1}}}",
                        "t.json:2:2: webhooks: a schedule takes \"webhooks\" from its phases'"
                        " profiles");
    /* Also when written before "schedule", and when it would be valid. */
    schedule_fails_with("{\"name\": \"s\", \"webhooks\": {},\n"
                        " \"schedule\": [{\"for_s\": 1, \"profile\": \"normal\"}]}",
                        "t.json:1:15: webhooks: a schedule takes \"webhooks\" from its phases'"
                        " profiles");
}
END_TEST

START_TEST(test_profile_schedule_phases_may_have_webhooks)
{
    static const char text[] =
        "{\"name\": \"s\", \"schedule\": [\n"
        "  {\"for_s\": 1, \"profile\": {\"name\": \"a\", \"routes\": {},\n"
        "     \"webhooks\": {\"drop\": {\"p\": 0.25},"
        " \"delay\": {\"dist\": \"fixed\", \"ms\": 100}}}},\n"
        "  {\"for_s\": 1, \"profile\": \"hooks\"}]}";
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int calls = 0;
    ck_assert_msg(profile_parse(text, strlen(text), "t.json", test_resolve, &calls, &p, err) == 0,
                  "unexpected rejection: %s", err);
    assert_no_webhook_faults(&p->webhooks);
    ck_assert_uint_eq(p->n_phases, 2);
    const struct webhook_faults *w = &p->phases[0].profile->webhooks;
    ck_assert_double_eq(w->drop_p, 0.25);
    ck_assert_int_eq(w->delay.kind, DIST_FIXED);
    ck_assert_double_eq(w->delay.a, 100);
    ck_assert_double_eq(w->duplicate_p, 0);
    w = &p->phases[1].profile->webhooks;
    ck_assert_double_eq(w->duplicate_p, 1);
    ck_assert_int_eq(w->duplicate_after.kind, DIST_EXPONENTIAL);
    ck_assert_double_eq(w->duplicate_after.a, 250);
    ck_assert_double_eq(w->drop_p, 0);
    profile_free(p);

    /* An inline phase's webhooks are validated, and located, inside it. */
    schedule_fails_with("{\"name\": \"s\", \"schedule\": [\n"
                        "  {\"for_s\": 1, \"profile\": {\"name\": \"a\", \"routes\": {},\n"
                        "     \"webhooks\": {\"drop\": {\"p\": 0.5},"
                        " \"duplicate\": {\"p\": 0.75}}}}]}",
                        "t.json:3:58: schedule[0].profile.webhooks.duplicate.p: drop.p +"
                        " duplicate.p = 1.25: one draw decides, so they must sum to <= 1");
}
END_TEST

/* {"name": "x",\n "d": <levels arrays>} (caller frees). */
static char *deep_profile(size_t levels)
{
    size_t head = strlen("{\"name\": \"x\",\n \"d\": ");
    char *t = malloc(head + 2 * levels + 2);
    ck_assert_ptr_nonnull(t);
    memcpy(t, "{\"name\": \"x\",\n \"d\": ", head);
    memset(t + head, '[', levels);
    memset(t + head + levels, ']', levels);
    strcpy(t + head + 2 * levels, "}");
    return t;
}

START_TEST(test_profile_nested_deeper_than_32_levels_is_refused_at_the_first_bracket_too_deep)
{
    /* The object is level 1, "d"'s first '[' (column 7) level 2: level 33 opens at column 38. */
    char *t = deep_profile(40);
    parse_fails_with(t, "t.json:2:38: nested deeper than 32 levels (the most a profile may nest)");
    free(t);
    t = deep_profile(31); /* 32 levels: within the limit, refused for its unknown key instead */
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    ck_assert_int_eq(profile_parse(t, strlen(t), "t.json", NULL, NULL, &p, err), -1);
    ck_assert_msg(strstr(err, "nested deeper") == NULL && strstr(err, "\"d\""), "%s", err);
    free(t);
    /* Brackets inside strings are no levels. */
    profile_free(parse_ok("{\"name\": \"x\", \"routes\": {}, "
                          "\"description\": \"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"}"));
    /* The X-Fakegate-Fault fault sits 4 levels down in a profile: it may nest 28. */
    char fault[128];
    snprintf(fault, sizeof fault, "{\"kind\": \"error\", \"x\": %s%s}",
             "[[[[[[[[[[[[[[[[[[[[[[[[[[[[", "]]]]]]]]]]]]]]]]]]]]]]]]]]]]");
    ck_assert_int_eq(profile_parse_fault(fault, strlen(fault), &p, err), -1);
    ck_assert_str_eq(err, "nested deeper than 28 levels (the most a fault may nest)");
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("profile");
    TCase *ok = tcase_create("valid");
    tcase_add_test(ok, test_profile_full_example_parses_into_right_values);
    tcase_add_test(ok, test_profile_unreachable_window_needs_an_explicit_retry_after);
    tcase_add_test(ok, test_profile_absent_route_falls_back_to_default);
    tcase_add_test(ok, test_profile_without_default_means_no_latency);
    tcase_add_test(ok, test_profile_minimal_gets_defaults);
    tcase_add_test(ok, test_profile_fractional_and_real_durations_are_accepted);
    tcase_add_test(ok, test_profile_mixture_weights_are_normalised);
    tcase_add_test(ok, test_profile_name_validity_rules);
    tcase_add_test(ok, test_route_names);
    tcase_add_test(ok, test_profile_empty_faults_array_is_no_faults);
    suite_add_tcase(s, ok);

    TCase *bad = tcase_create("rejections");
    tcase_add_test(bad, test_profile_nested_deeper_than_32_levels_is_refused_at_the_first_bracket_too_deep);
    tcase_add_test(bad, test_profile_escaped_keys_are_matched_and_located);
    tcase_add_test(bad, test_profile_typo_key_reports_line_and_column);
    tcase_add_test(bad, test_profile_parse_fault_is_one_default_fault_with_positionless_messages);
    tcase_add_test(bad, test_profile_unknown_key_far_from_any_gets_no_suggestion);
    tcase_add_test(bad, test_profile_unknown_route_reports_key_position);
    tcase_add_test(bad, test_profile_negative_latency_reports_value_position);
    tcase_add_test(bad, test_profile_latency_over_one_day_is_rejected);
    tcase_add_test(bad, test_profile_wrong_type_reports_value_position);
    tcase_add_test(bad, test_profile_route_not_an_object_is_rejected);
    tcase_add_test(bad, test_profile_uniform_min_above_max_is_rejected_at_max);
    tcase_add_test(bad, test_profile_lognormal_p99_below_median_is_rejected);
    tcase_add_test(bad, test_profile_lognormal_zero_median_is_rejected);
    tcase_add_test(bad, test_profile_bad_name_is_rejected_at_value);
    tcase_add_test(bad, test_profile_unknown_dist_is_rejected_at_value);
    tcase_add_test(bad, test_profile_dist_missing_is_rejected_at_object);
    tcase_add_test(bad, test_profile_key_of_other_dist_is_rejected);
    tcase_add_test(bad, test_profile_mixture_zero_weight_is_rejected_at_weight);
    tcase_add_test(bad, test_profile_mixture_empty_is_rejected);
    tcase_add_test(bad, test_profile_nested_mixture_is_rejected);
    tcase_add_test(bad, test_profile_weight_outside_mixture_is_unknown_key);
    tcase_add_test(bad, test_profile_malformed_json_missing_comma_points_at_next_key);
    tcase_add_test(bad, test_profile_truncated_json_points_at_end);
    tcase_add_test(bad, test_profile_duplicate_key_points_at_second_key);
    tcase_add_test(bad, test_profile_missing_name_is_rejected);
    tcase_add_test(bad, test_profile_missing_routes_is_rejected);
    tcase_add_test(bad, test_profile_non_object_top_level_is_rejected);
    tcase_add_test(bad, test_profile_bad_seed_is_rejected);
    tcase_add_test(bad, test_profile_bad_on_body_mismatch_is_rejected);
    tcase_add_test(bad, test_profile_columns_count_characters);
    tcase_add_test(bad, test_profile_semantic_and_syntax_errors_agree_on_a_column_after_utf8);
    suite_add_tcase(s, bad);

    TCase *faults = tcase_create("faults");
    tcase_add_test(faults, test_profile_spec_example_parses_with_every_value);
    tcase_add_test(faults, test_profile_error_status_defaults_from_the_table);
    tcase_add_test(faults, test_profile_error_fault_keeps_every_key);
    tcase_add_test(faults, test_profile_fault_attempts_times_and_hang_default);
    tcase_add_test(faults, test_profile_scripted_attempts_may_each_have_p_1);
    tcase_add_test(faults, test_profile_p_sum_over_one_points_at_the_tipping_fault);
    tcase_add_test(faults, test_profile_p_sum_is_checked_per_attempt);
    tcase_add_test(faults, test_profile_p_outside_zero_one_is_rejected);
    tcase_add_test(faults, test_profile_commit_with_when_before_is_rejected);
    tcase_add_test(faults, test_profile_truncate_on_drop_request_is_rejected);
    tcase_add_test(faults, test_profile_key_of_another_fault_kind_is_unknown);
    tcase_add_test(faults, test_profile_bad_fault_kind_and_how_are_rejected);
    tcase_add_test(faults, test_profile_bad_attempts_and_times_are_rejected);
    tcase_add_test(faults, test_profile_error_fault_code_and_status_are_validated);
    tcase_add_test(faults, test_profile_absurd_fault_durations_are_rejected);
    suite_add_tcase(s, faults);

    TCase *thr = tcase_create("throttle");
    tcase_add_test(thr, test_profile_throttle_window_defaults);
    tcase_add_test(thr, test_profile_retry_after_forms);
    tcase_add_test(thr, test_profile_retry_after_above_int32_is_rejected);
    tcase_add_test(thr, test_profile_bad_retry_after_objects_are_rejected);
    tcase_add_test(thr, test_profile_throttle_status_500_is_rejected);
    tcase_add_test(thr, test_profile_bad_throttle_values_are_rejected);
    tcase_add_test(thr, test_profile_bad_concurrency_is_rejected);
    suite_add_tcase(s, thr);

    TCase *sched = tcase_create("schedules");
    tcase_add_test(sched, test_profile_schedule_with_inline_and_named_phases);
    tcase_add_test(sched, test_profile_schedule_repeat_defaults_to_false);
    tcase_add_test(sched, test_profile_schedule_unknown_phase_name_is_rejected_at_its_value);
    tcase_add_test(sched, test_profile_schedule_by_name_without_resolver_is_rejected);
    tcase_add_test(sched, test_profile_nested_schedule_is_rejected);
    tcase_add_test(sched, test_profile_schedule_shape_is_validated);
    tcase_add_test(sched, test_profile_inline_phase_errors_are_located_inside_it);
    suite_add_tcase(s, sched);

    TCase *hooks = tcase_create("webhooks");
    tcase_add_test(hooks, test_profile_webhooks_example_parses_with_exact_values);
    tcase_add_test(hooks, test_profile_without_webhooks_has_no_webhook_faults);
    tcase_add_test(hooks, test_profile_webhooks_delay_takes_any_latency_dist);
    tcase_add_test(hooks, test_profile_webhooks_unknown_keys_are_rejected_at_the_key);
    tcase_add_test(hooks, test_profile_webhooks_p_outside_zero_one_is_rejected);
    tcase_add_test(hooks, test_profile_webhooks_wrong_types_are_rejected_at_the_value);
    tcase_add_test(hooks, test_profile_webhooks_missing_p_is_rejected_at_the_object);
    tcase_add_test(hooks, test_profile_webhooks_p_sum_over_one_points_at_the_later_p);
    tcase_add_test(hooks, test_profile_webhooks_bad_dists_are_rejected_like_a_latency);
    tcase_add_test(hooks, test_profile_schedule_top_level_webhooks_is_rejected);
    tcase_add_test(hooks, test_profile_schedule_phases_may_have_webhooks);
    suite_add_tcase(s, hooks);

    TCase *file = tcase_create("files");
    tcase_add_test(file, test_profile_load_file_missing_gives_strerror);
    tcase_add_test(file, test_profile_load_file_uses_path_as_origin);
    tcase_add_test(file, test_profile_load_file_over_one_mib_is_rejected);
    suite_add_tcase(s, file);
    return s;
}
