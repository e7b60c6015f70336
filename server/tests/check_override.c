/* check_override.c -- unit tests for override.c, the per-request override headers (docs/profiles.md
 * §4): the X-Fakegate-Fault grammar ("kind; key=value; ...", the kind first, p defaulting to 1,
 * attempts as "1,3", retry_after as seconds, auto or a format) turned into a profile whose default
 * route has exactly that fault, each accepted form checked field by field, each rejected form
 * checked for its exact message (the header's own grammar errors, and the profile validator's,
 * prefixed "X-Fakegate-Fault: "); and X-Fakegate-Latency-Ms, a plain decimal number of ms in 0 ..
 * 86 400 000, with its exact message for everything else. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "override.h"

/* Parse `header`, require success and exactly one fault on the default route (and nothing on
 * the others); the fault is borrowed from *p (caller profile_frees it). */
static const struct fault *the_fault(const char *header, struct profile **p)
{
    char err[ERR_LEN] = "";
    int rc = override_fault_parse(header, p, err);
    ck_assert_msg(rc == 0, "\"%s\" rejected: %s", header, err);
    ck_assert_ptr_nonnull(*p);
    const struct route_profile *d = &(*p)->routes[ROUTE_DEFAULT];
    ck_assert(d->present);
    ck_assert_uint_eq(d->n_faults, 1);
    for (int r = 0; r < ROUTE_DEFAULT; r++) {
        ck_assert(!(*p)->routes[r].present);
        ck_assert_uint_eq((*p)->routes[r].n_faults, 0);
    }
    return &d->faults[0];
}

static void assert_fault_rejected(const char *header, const char *message)
{
    struct profile *p = (struct profile *)1;
    char err[ERR_LEN] = "";
    ck_assert_msg(override_fault_parse(header, &p, err) == -1, "\"%s\" accepted", header);
    ck_assert_ptr_null(p);
    ck_assert_msg(strcmp(err, message) == 0, "\"%s\": message\n  %s\nwant\n  %s", header, err,
                  message);
}

/* ---- X-Fakegate-Fault: accepted forms ----------------------------------------------------- */

START_TEST(test_fault_drop_response_with_how)
{
    struct profile *p;
    const struct fault *f = the_fault("drop_response; how=reset", &p);
    ck_assert_int_eq(f->kind, FAULT_DROP_RESPONSE);
    ck_assert_int_eq(f->how, HOW_RESET);
    ck_assert_double_eq(f->p, 1); /* the default */
    ck_assert_uint_eq(f->n_attempts, 0);
    ck_assert_int_eq(f->times, -1);
    profile_free(p);

    f = the_fault("drop_response; how=truncate", &p);
    ck_assert_int_eq(f->how, HOW_TRUNCATE);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_drop_request_hang_with_spaces_around_everything)
{
    struct profile *p;
    const struct fault *f = the_fault("  drop_request ;\thow = hang ;  hang_ms=250 ", &p);
    ck_assert_int_eq(f->kind, FAULT_DROP_REQUEST);
    ck_assert_int_eq(f->how, HOW_HANG);
    ck_assert_double_eq(f->hang_ms, 250);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_error_with_status_code_and_retry_after_seconds)
{
    struct profile *p;
    const struct fault *f = the_fault(
        "error; status=503; code=SERVICE_UNAVAILABLE; retry_after=5; when=before", &p);
    ck_assert_int_eq(f->kind, FAULT_ERROR);
    ck_assert_int_eq(f->status, 503);
    ck_assert_str_eq(f->code, "SERVICE_UNAVAILABLE");
    ck_assert_ptr_null(f->message);
    ck_assert_int_eq(f->body, BODY_JSON);
    ck_assert(f->when_before);
    ck_assert(!f->commit);
    ck_assert_int_eq(f->retry_after.format, RA_SECONDS);
    ck_assert(!f->retry_after.is_auto);
    ck_assert_uint_eq(f->retry_after.seconds, 5);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_error_status_defaults_from_the_code_table)
{
    struct profile *p;
    const struct fault *f =
        the_fault("error; code=FAILED_INTERNAL_SYSTEM_PROCESSING; commit=true", &p);
    ck_assert_int_eq(f->status, 500);
    ck_assert_str_eq(f->code, "FAILED_INTERNAL_SYSTEM_PROCESSING");
    ck_assert(f->commit);
    ck_assert(!f->when_before); /* "after" is the default */
    ck_assert_int_eq(f->retry_after.format, RA_NONE);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_retry_after_auto_and_http_date)
{
    struct profile *p;
    const struct fault *f = the_fault("error; code=SERVICE_UNAVAILABLE; retry_after=auto", &p);
    ck_assert_int_eq(f->retry_after.format, RA_SECONDS);
    ck_assert(f->retry_after.is_auto);
    profile_free(p);

    f = the_fault("error; status=429; code=COMMON_ERROR; retry_after=http-date", &p);
    ck_assert_int_eq(f->status, 429);
    ck_assert_str_eq(f->code, "COMMON_ERROR");
    ck_assert_int_eq(f->retry_after.format, RA_HTTP_DATE);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_p_attempts_message_and_body)
{
    struct profile *p;
    const struct fault *f = the_fault(
        "error; code=SERVICE_UNAVAILABLE; p=0.25; attempts=1,3; body=html; message=hi there", &p);
    ck_assert_double_eq(f->p, 0.25);
    ck_assert_uint_eq(f->n_attempts, 2);
    ck_assert_uint_eq(f->attempts[0], 1);
    ck_assert_uint_eq(f->attempts[1], 3);
    ck_assert_int_eq(f->body, BODY_HTML);
    ck_assert_str_eq(f->message, "hi there");
    ck_assert_int_eq(f->status, 503);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_single_attempt_is_a_list_of_one)
{
    struct profile *p;
    const struct fault *f = the_fault("drop_request; how=close; attempts=1", &p);
    ck_assert_uint_eq(f->n_attempts, 1);
    ck_assert_uint_eq(f->attempts[0], 1);
    profile_free(p);
}
END_TEST

START_TEST(test_fault_drip_with_duration)
{
    struct profile *p;
    const struct fault *f = the_fault("drip; duration_ms=1500", &p);
    ck_assert_int_eq(f->kind, FAULT_DRIP);
    ck_assert_double_eq(f->duration_ms, 1500);
    profile_free(p);
}
END_TEST

/* ---- X-Fakegate-Fault: rejected forms ----------------------------------------------------- */

START_TEST(test_fault_grammar_errors_have_their_own_messages)
{
    static const char kind_first[] = "X-Fakegate-Fault: the fault's kind comes first (error, "
                                     "drop_request, drop_response or drip)";
    assert_fault_rejected("", kind_first);
    assert_fault_rejected(";", kind_first);
    assert_fault_rejected("status=500; code=X", kind_first);
    assert_fault_rejected("error; status",
                          "X-Fakegate-Fault: expected key=value, got \"status\"");
    assert_fault_rejected("error; =5", "X-Fakegate-Fault: expected key=value, got \"=5\"");
    assert_fault_rejected("error; code=SERVICE_UNAVAILABLE; p=1; p=0.5",
                          "X-Fakegate-Fault: \"p\" given twice");
}
END_TEST

START_TEST(test_fault_validation_errors_name_the_field)
{
    assert_fault_rejected("bogus", "X-Fakegate-Fault: kind: expected \"error\", "
                                   "\"drop_request\", \"drop_response\" or \"drip\"");
    assert_fault_rejected("drop_response; how=sideways", "X-Fakegate-Fault: how: expected "
                                                         "\"close\", \"reset\", \"hang\" or "
                                                         "\"truncate\"");
    assert_fault_rejected("drop_request; how=truncate",
                          "X-Fakegate-Fault: how: truncate is only valid for drop_response");
    assert_fault_rejected("drop_response", "X-Fakegate-Fault: missing \"how\"");
    assert_fault_rejected("drip", "X-Fakegate-Fault: missing \"duration_ms\"");
    assert_fault_rejected("error; status=500", "X-Fakegate-Fault: missing \"code\"");
    assert_fault_rejected("error; code=lower",
                          "X-Fakegate-Fault: code: expected an error code ([A-Z0-9_]+)");
    assert_fault_rejected("error; code=X",
                          "X-Fakegate-Fault: code: \"X\" is not in the error table, so "
                          "\"status\" is required");
    assert_fault_rejected("error; code=FAILED_INTERNAL_SYSTEM_PROCESSING; commit=true; "
                          "when=before",
                          "X-Fakegate-Fault: commit: true is only valid with when: after");
    assert_fault_rejected("error; code=SERVICE_UNAVAILABLE; p=2",
                          "X-Fakegate-Fault: p: expected a probability in [0, 1]");
    assert_fault_rejected("error; code=SERVICE_UNAVAILABLE; retry_after=1.5",
                          "X-Fakegate-Fault: retry_after.value: expected whole seconds "
                          "(0..2147483647) or \"auto\" (format \"raw\" sends anything else)");
    assert_fault_rejected("error; code=SERVICE_UNAVAILABLE; colour=red",
                          "X-Fakegate-Fault: unknown key \"colour\"");
}
END_TEST

/* ---- X-Fakegate-Latency-Ms ---------------------------------------------------------------- */

START_TEST(test_latency_accepts_plain_decimal_ms_up_to_a_day)
{
    static const struct {
        const char *header;
        double ms;
    } ok[] = {{"0", 0}, {"2500", 2500}, {"2.5", 2.5}, {"0.125", 0.125}, {"86400000", 86400000}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        double ms = -1;
        char err[ERR_LEN] = "";
        ck_assert_msg(override_latency_parse(ok[i].header, &ms, err) == 0, "\"%s\": %s",
                      ok[i].header, err);
        ck_assert_double_eq(ms, ok[i].ms);
    }
}
END_TEST

START_TEST(test_latency_rejects_anything_else_with_one_message)
{
    static const char *const bad[] = {"",    "86400001", "-1",  "+5",  "1e3",   "0x10", " 5",
                                      "5 ",  "5ms",      ".5",  "inf", "nan",   "1.5.5", "1,5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        double ms = -7;
        char err[ERR_LEN] = "";
        ck_assert_msg(override_latency_parse(bad[i], &ms, err) == -1, "\"%s\" accepted as %g",
                      bad[i], ms);
        ck_assert_double_eq(ms, -7); /* untouched */
        char want[ERR_LEN];
        snprintf(want, sizeof want,
                 "X-Fakegate-Latency-Ms: expected milliseconds from 0 to 86400000, got \"%s\"",
                 bad[i]);
        ck_assert_str_eq(err, want);
    }
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("override");
    TCase *ok = tcase_create("fault_accepted");
    tcase_add_test(ok, test_fault_drop_response_with_how);
    tcase_add_test(ok, test_fault_drop_request_hang_with_spaces_around_everything);
    tcase_add_test(ok, test_fault_error_with_status_code_and_retry_after_seconds);
    tcase_add_test(ok, test_fault_error_status_defaults_from_the_code_table);
    tcase_add_test(ok, test_fault_retry_after_auto_and_http_date);
    tcase_add_test(ok, test_fault_p_attempts_message_and_body);
    tcase_add_test(ok, test_fault_single_attempt_is_a_list_of_one);
    tcase_add_test(ok, test_fault_drip_with_duration);
    suite_add_tcase(s, ok);
    TCase *bad = tcase_create("fault_rejected");
    tcase_add_test(bad, test_fault_grammar_errors_have_their_own_messages);
    tcase_add_test(bad, test_fault_validation_errors_name_the_field);
    suite_add_tcase(s, bad);
    TCase *lat = tcase_create("latency");
    tcase_add_test(lat, test_latency_accepts_plain_decimal_ms_up_to_a_day);
    tcase_add_test(lat, test_latency_rejects_anything_else_with_one_message);
    suite_add_tcase(s, lat);
    return s;
}
