/* check_profile.c -- unit tests for profile.c: a valid profile becomes the right structs, and
 * every rejection names the exact origin:line:column of the offending key or value. Profiles are
 * written inline, one JSON line per C line, so a test's expected line:column can be read off it. */
#define _POSIX_C_SOURCE 200809L
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile.h"

/* Parses `text` as origin "t.json", expecting success. */
static struct profile *parse_ok(const char *text)
{
    struct profile *p = NULL;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", &p, err);
    ck_assert_msg(rc == 0, "unexpected rejection: %s", err);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* Parses `text` as origin "t.json", expecting rejection with exactly `want`. */
static void parse_fails_with(const char *text, const char *want)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", &p, err);
    ck_assert_int_eq(rc, -1);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err, want);
}

/* Same, but only the "t.json:line:column: " prefix is checked. */
static void parse_fails_at(const char *text, const char *want_prefix)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    int rc = profile_parse(text, strlen(text), "t.json", &p, err);
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

START_TEST(test_profile_faults_not_supported_yet)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"confirm\": {\n"
                     "  \"latency\": {\"dist\": \"fixed\", \"ms\": 5},\n"
                     "  \"faults\": []}}}",
                     "t.json:3:3: routes.confirm.faults: not supported yet");
}
END_TEST

START_TEST(test_profile_throttle_and_schedule_not_supported_yet)
{
    parse_fails_with("{\"name\": \"x\", \"routes\": {\"read\": {\"throttle\": {}}}}",
                     "t.json:1:35: routes.read.throttle: not supported yet");
    parse_fails_with("{\"name\": \"x\", \"schedule\": [], \"repeat\": true}",
                     "t.json:1:15: schedule: not supported yet");
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

START_TEST(test_profile_columns_count_bytes)
{
    /* "é" is two bytes: the column is a byte column, as editors' "byte offset" modes show. */
    parse_fails_with("{\"description\": \"h\xc3\xa9\xc3\xa9\", \"namex\": 1}",
                     "t.json:1:26: unknown key \"namex\" (did you mean \"name\"?)");
}
END_TEST

START_TEST(test_profile_load_file_missing_gives_strerror)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN];
    ck_assert_int_eq(profile_load_file("/nonexistent/fakegate.json", &p, err), -1);
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
    ck_assert_int_eq(profile_load_file(path, &p, err), -1);
    snprintf(want, sizeof(want), "%s:2:21: routes.read: expected an object", path);
    ck_assert_str_eq(err, want);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(FULL, f);
    fclose(f);
    ck_assert_int_eq(profile_load_file(path, &p, err), 0);
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
    ck_assert_int_eq(profile_load_file(path, &p, err), -1);
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

static Suite *profile_suite(void)
{
    Suite *s = suite_create("profile");
    TCase *ok = tcase_create("valid");
    tcase_add_test(ok, test_profile_full_example_parses_into_right_values);
    tcase_add_test(ok, test_profile_absent_route_falls_back_to_default);
    tcase_add_test(ok, test_profile_without_default_means_no_latency);
    tcase_add_test(ok, test_profile_minimal_gets_defaults);
    tcase_add_test(ok, test_profile_fractional_and_real_durations_are_accepted);
    tcase_add_test(ok, test_profile_mixture_weights_are_normalised);
    tcase_add_test(ok, test_profile_name_validity_rules);
    tcase_add_test(ok, test_route_names);
    suite_add_tcase(s, ok);

    TCase *bad = tcase_create("rejections");
    tcase_add_test(bad, test_profile_escaped_keys_are_matched_and_located);
    tcase_add_test(bad, test_profile_typo_key_reports_line_and_column);
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
    tcase_add_test(bad, test_profile_faults_not_supported_yet);
    tcase_add_test(bad, test_profile_throttle_and_schedule_not_supported_yet);
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
    tcase_add_test(bad, test_profile_columns_count_bytes);
    suite_add_tcase(s, bad);

    TCase *file = tcase_create("files");
    tcase_add_test(file, test_profile_load_file_missing_gives_strerror);
    tcase_add_test(file, test_profile_load_file_uses_path_as_origin);
    tcase_add_test(file, test_profile_load_file_over_one_mib_is_rejected);
    suite_add_tcase(s, file);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(profile_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
