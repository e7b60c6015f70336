/* check_idem.c -- unit tests for idem.c: claim / complete / release ownership, TTL expiry of
 * DONE records (at lookup, and by the oldest-first sweep), scope construction (NUL-separated
 * parts), the bound on records and a 10^4-record store. Pure: the clock is a parameter, so no test sleeps or reads a
 * real clock. */
#include <check.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "idem.h"

#define TTL_NS INT64_C(1000000000)
#define T0 INT64_C(5000)

/* A scope for (sk, key, "POST", "/v1/payments/confirm"); caller frees. */
static char *scope_of(const char *key, size_t *len)
{
    char *s = idem_scope("test_sk_abc", key, "POST", "/v1/payments/confirm", len);
    ck_assert_ptr_nonnull(s);
    return s;
}

/* A response owning a heap copy of `text`. */
static struct idem_response body_resp(int status, const char *text)
{
    struct idem_response r;
    memset(&r, 0, sizeof r);
    r.status = status;
    r.body_len = strlen(text);
    r.body = malloc(r.body_len + 1);
    ck_assert_ptr_nonnull(r.body);
    memcpy(r.body, text, r.body_len + 1);
    return r;
}

START_TEST(test_idem_claim_creates_processing_owned_by_claimer)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 0xabcdu, T0);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->state, IDEM_PROCESSING);
    ck_assert_ptr_eq(r->owner, &owner);
    ck_assert_uint_eq(r->body_hash, 0xabcdu);
    ck_assert_int_eq(r->expires_ns, T0 + TTL_NS);
    ck_assert_uint_eq(r->scope_len, len);
    ck_assert_int_eq(memcmp(r->scope, sc, len), 0);
    ck_assert_ptr_ne(r->scope, sc); /* the record keeps its own copy */
    ck_assert_uint_eq(idem_count(&s), 1);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_lookup_returns_claimed_record_and_null_for_unknown_scope)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len, len2;
    char *sc = scope_of("k1", &len);
    char *other = scope_of("k2", &len2);
    ck_assert_ptr_null(idem_lookup(&s, sc, len, T0));
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, T0), r);
    ck_assert_ptr_null(idem_lookup(&s, other, len2, T0));
    free(sc);
    free(other);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_second_request_sees_processing_with_first_owner)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int first, second;
    size_t len;
    char *sc = scope_of("k1", &len);
    idem_claim(&s, sc, len, &first, 1, T0);
    /* A second request with the same scope looks up instead of claiming. */
    struct idem_record *r = idem_lookup(&s, sc, len, T0 + 10);
    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(r->state, IDEM_PROCESSING);
    ck_assert_ptr_eq(r->owner, &first);
    ck_assert_ptr_ne(r->owner, &second);
    ck_assert_uint_eq(idem_count(&s), 1);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_non_owner_cannot_complete)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner, intruder;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp = body_resp(200, "{\"x\":1}");
    char *mine = resp.body;
    ck_assert_int_eq(idem_complete(r, &intruder, &resp), -1);
    ck_assert_int_eq(r->state, IDEM_PROCESSING);
    ck_assert_ptr_eq(r->owner, &owner);
    ck_assert_ptr_null(r->resp.body);
    ck_assert_ptr_eq(resp.body, mine); /* still the caller's */
    free(resp.body);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_owner_completes_to_done_and_record_owns_body)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp = body_resp(400, "{\"code\":\"ALREADY_PROCESSED_PAYMENT\"}");
    char *body = resp.body;
    ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
    ck_assert_ptr_null(resp.body);
    ck_assert_int_eq(r->state, IDEM_DONE);
    ck_assert_ptr_null(r->owner);
    ck_assert_int_eq(r->resp.status, 400);
    ck_assert_ptr_eq(r->resp.body, body);
    ck_assert_uint_eq(r->resp.body_len, strlen("{\"code\":\"ALREADY_PROCESSED_PAYMENT\"}"));
    ck_assert_str_eq(r->resp.body, "{\"code\":\"ALREADY_PROCESSED_PAYMENT\"}");
    struct idem_record *again = idem_lookup(&s, sc, len, T0 + 1);
    ck_assert_ptr_eq(again, r);
    ck_assert_int_eq(again->state, IDEM_DONE);
    free(sc);
    idem_fini(&s); /* frees the body: ASan would report a leak or double free */
}
END_TEST

START_TEST(test_idem_complete_keeps_payment_view_fields)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp;
    memset(&resp, 0, sizeof resp);
    resp.status = 200;
    resp.payment = (struct payment *)(void *)&owner; /* opaque: never dereferenced by idem */
    resp.view_cancels = 2;
    resp.view_status = 3;
    resp.en = true;
    ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
    ck_assert_int_eq(r->resp.status, 200);
    ck_assert_ptr_eq(r->resp.payment, (void *)&owner);
    ck_assert_uint_eq(r->resp.view_cancels, 2);
    ck_assert_uint_eq(r->resp.view_status, 3);
    ck_assert(r->resp.en);
    ck_assert_ptr_null(r->resp.body);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_done_record_cannot_be_completed_or_released_again)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp = body_resp(200, "first");
    ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
    struct idem_response second = body_resp(500, "second");
    ck_assert_int_eq(idem_complete(r, &owner, &second), -1);
    ck_assert_int_eq(idem_release(&s, r, &owner), -1);
    ck_assert_str_eq(r->resp.body, "first");
    ck_assert_int_eq(r->resp.status, 200);
    ck_assert_uint_eq(idem_count(&s), 1);
    free(second.body);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_non_owner_cannot_release)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner, intruder;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    ck_assert_int_eq(idem_release(&s, r, &intruder), -1);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, T0), r);
    ck_assert_int_eq(r->state, IDEM_PROCESSING);
    ck_assert_ptr_eq(r->owner, &owner);
    ck_assert_uint_eq(idem_count(&s), 1);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_owner_release_deletes_record)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner, next;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    ck_assert_int_eq(idem_release(&s, r, &owner), 0);
    ck_assert_ptr_null(idem_lookup(&s, sc, len, T0));
    ck_assert_uint_eq(idem_count(&s), 0);
    /* A resend runs again: a new claim succeeds. */
    struct idem_record *r2 = idem_claim(&s, sc, len, &next, 2, T0 + 1);
    ck_assert_ptr_nonnull(r2);
    ck_assert_ptr_eq(r2->owner, &next);
    ck_assert_uint_eq(idem_count(&s), 1);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_done_record_expires_at_ttl)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp = body_resp(200, "ok");
    ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, T0 + TTL_NS - 1), r);
    ck_assert_ptr_null(idem_lookup(&s, sc, len, T0 + TTL_NS));
    ck_assert_uint_eq(idem_count(&s), 0);
    ck_assert_ptr_null(idem_lookup(&s, sc, len, T0 + TTL_NS + 1));
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_processing_record_never_expires)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, T0 + TTL_NS), r);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, T0 + 1000 * TTL_NS), r);
    ck_assert_ptr_eq(idem_lookup(&s, sc, len, INT64_MAX), r);
    ck_assert_int_eq(r->state, IDEM_PROCESSING);
    ck_assert_uint_eq(idem_count(&s), 1);
    free(sc);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_claim_replaces_expired_record_not_looked_up)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner, next;
    size_t len;
    char *sc = scope_of("k1", &len);
    struct idem_record *r = idem_claim(&s, sc, len, &owner, 1, T0);
    struct idem_response resp = body_resp(200, "old");
    ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
    struct idem_record *r2 = idem_claim(&s, sc, len, &next, 2, T0 + 2 * TTL_NS);
    ck_assert_ptr_nonnull(r2);
    ck_assert_uint_eq(idem_count(&s), 1);
    struct idem_record *got = idem_lookup(&s, sc, len, T0 + 2 * TTL_NS);
    ck_assert_ptr_eq(got, r2);
    ck_assert_int_eq(got->state, IDEM_PROCESSING);
    ck_assert_uint_eq(got->body_hash, 2);
    free(sc);
    idem_fini(&s);
}
END_TEST

/* Claim `n` records "s0".."s<n-1>" at T0 + i ns; the even ones DONE when `done_even`, else all
 * DONE. Scopes go to scopes[] (caller frees). */
static void claim_n(struct idem_store *s, int n, int *owners, char **scopes, size_t *lens,
                    struct idem_record **recs, bool done_even)
{
    char key[16];
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "s%d", i);
        scopes[i] = scope_of(key, &lens[i]);
        recs[i] = idem_claim(s, scopes[i], lens[i], &owners[i], 1, T0 + i);
        ck_assert_ptr_nonnull(recs[i]);
        if (!done_even || i % 2 == 0) {
            struct idem_response resp = body_resp(200, "done");
            ck_assert_int_eq(idem_complete(recs[i], &owners[i], &resp), 0);
        }
    }
}

START_TEST(test_idem_sweep_frees_expired_done_records_oldest_first_and_stops_at_a_live_one)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owners[10];
    char *scopes[10];
    size_t lens[10];
    struct idem_record *recs[10];
    claim_n(&s, 10, owners, scopes, lens, recs, false);
    ck_assert_uint_eq(idem_sweep(&s, T0 + TTL_NS - 1, 100, NULL), 0); /* none expired yet */
    ck_assert_uint_eq(idem_count(&s), 10);
    bool more = true;
    /* Records 0..3 expired at T0 + TTL + 3: exactly those go, nothing newer is looked at. */
    ck_assert_uint_eq(idem_sweep(&s, T0 + TTL_NS + 3, 100, &more), 4);
    ck_assert(!more);
    ck_assert_uint_eq(idem_count(&s), 6);
    for (int i = 0; i < 10; i++)
        ck_assert_ptr_eq(idem_lookup(&s, scopes[i], lens[i], T0 + 1), i < 4 ? NULL : recs[i]);
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 100, &more), 6);
    ck_assert_uint_eq(idem_count(&s), 0);
    ck_assert_ptr_null(s.oldest);
    ck_assert_ptr_null(s.newest);
    for (int i = 0; i < 10; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_sweep_looks_at_no_more_than_its_budget)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owners[10];
    char *scopes[10];
    size_t lens[10];
    struct idem_record *recs[10];
    claim_n(&s, 10, owners, scopes, lens, recs, false);
    bool more = false;
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 3, &more), 3);
    ck_assert(more);
    ck_assert_uint_eq(idem_count(&s), 7);
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 7, &more), 7);
    ck_assert(!more); /* nothing left: the budget did not run out before the end */
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 0, &more), 0);
    ck_assert(!more);
    for (int i = 0; i < 10; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_sweep_passes_over_a_processing_record_and_frees_it_once_done)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owners[6];
    char *scopes[6];
    size_t lens[6];
    struct idem_record *recs[6];
    claim_n(&s, 6, owners, scopes, lens, recs, true); /* 1, 3, 5 still PROCESSING */
    bool more = true;
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 100, &more), 3);
    ck_assert(!more);
    ck_assert_uint_eq(idem_count(&s), 3);
    for (int i = 1; i < 6; i += 2) {
        ck_assert_ptr_eq(idem_lookup(&s, scopes[i], lens[i], INT64_MAX), recs[i]);
        ck_assert_int_eq(recs[i]->state, IDEM_PROCESSING);
    }
    /* The owner of 3 releases it, 1 and 5 complete: the next sweep frees those two. */
    ck_assert_int_eq(idem_release(&s, recs[3], &owners[3]), 0);
    struct idem_response r1 = body_resp(200, "a"), r5 = body_resp(200, "b");
    ck_assert_int_eq(idem_complete(recs[1], &owners[1], &r1), 0);
    ck_assert_int_eq(idem_complete(recs[5], &owners[5], &r5), 0);
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 100, &more), 2);
    ck_assert_uint_eq(idem_count(&s), 0);
    for (int i = 0; i < 6; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_sweep_after_lookups_replacements_and_reset_keeps_the_list_whole)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owners[8], next;
    char *scopes[8];
    size_t lens[8];
    struct idem_record *recs[8];
    claim_n(&s, 8, owners, scopes, lens, recs, false);
    /* An expired record dropped by its lookup, one replaced by a new claim, then the sweep. */
    ck_assert_ptr_null(idem_lookup(&s, scopes[2], lens[2], T0 + TTL_NS + 2));
    struct idem_record *again = idem_claim(&s, scopes[5], lens[5], &next, 9, T0 + 2 * TTL_NS);
    ck_assert_ptr_nonnull(again);
    ck_assert_uint_eq(idem_count(&s), 7);
    /* At T0 + 2 TTL every first-round record is expired; the new claim is PROCESSING. */
    ck_assert_uint_eq(idem_sweep(&s, T0 + 2 * TTL_NS, 100, NULL), 6);
    ck_assert_uint_eq(idem_count(&s), 1);
    ck_assert_ptr_eq(s.oldest, again);
    ck_assert_ptr_eq(s.newest, again);
    idem_reset(&s);
    ck_assert_uint_eq(idem_sweep(&s, INT64_MAX, 100, NULL), 0);
    ck_assert_ptr_null(s.oldest);
    ck_assert_ptr_nonnull(idem_claim(&s, scopes[0], lens[0], &next, 1, T0));
    ck_assert_ptr_eq(s.oldest, s.newest);
    for (int i = 0; i < 8; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_claim_beyond_max_records_is_refused_until_an_expired_one_is_freed)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    s.max_records = 3;
    int owners[4];
    char *scopes[4];
    size_t lens[4];
    struct idem_record *recs[3];
    claim_n(&s, 3, owners, scopes, lens, recs, false);
    scopes[3] = scope_of("s3", &lens[3]);
    /* Full, nothing expired: no room, and a claim without room fails, the store unchanged. */
    ck_assert(!idem_room(&s, T0 + 1));
    ck_assert_ptr_null(idem_claim(&s, scopes[3], lens[3], &owners[3], 1, T0 + 1));
    ck_assert_uint_eq(idem_count(&s), 3);
    for (int i = 0; i < 3; i++)
        ck_assert_ptr_eq(idem_lookup(&s, scopes[i], lens[i], T0 + 1), recs[i]);
    /* Record 0 has expired: asking for room frees it, and the claim fits. */
    ck_assert(idem_room(&s, T0 + TTL_NS));
    ck_assert_uint_eq(idem_count(&s), 2);
    ck_assert_ptr_nonnull(idem_claim(&s, scopes[3], lens[3], &owners[3], 1, T0 + TTL_NS));
    ck_assert(!idem_room(&s, T0 + TTL_NS));
    /* A release makes room too. */
    ck_assert_int_eq(idem_release(&s, idem_lookup(&s, scopes[3], lens[3], T0 + TTL_NS), &owners[3]),
                     0);
    ck_assert(idem_room(&s, T0 + TTL_NS));
    s.max_records = 0; /* no bound */
    ck_assert(idem_room(&s, T0));
    for (int i = 0; i < 4; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

START_TEST(test_idem_scope_is_parts_joined_by_nul)
{
    size_t len = 0;
    char *sc = idem_scope("sk", "key", "POST", "/p", &len);
    ck_assert_ptr_nonnull(sc);
    static const char want[] = "sk\0key\0POST\0/p";
    ck_assert_uint_eq(len, sizeof want - 1);
    ck_assert_int_eq(memcmp(sc, want, sizeof want), 0); /* including the final NUL */
    free(sc);
}
END_TEST

static bool same_scope(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && memcmp(a, b, alen) == 0;
}

START_TEST(test_idem_scope_differs_by_each_part)
{
    size_t l0, l1, l2, l3, l4, l5;
    char *base = idem_scope("test_sk_1", "k", "POST", "/v1/payments/confirm", &l0);
    char *sk = idem_scope("test_sk_2", "k", "POST", "/v1/payments/confirm", &l1);
    char *key = idem_scope("test_sk_1", "K", "POST", "/v1/payments/confirm", &l2);
    char *method = idem_scope("test_sk_1", "k", "PUT", "/v1/payments/confirm", &l3);
    char *path = idem_scope("test_sk_1", "k", "POST", "/v1/payments/x/cancel", &l4);
    char *same = idem_scope("test_sk_1", "k", "POST", "/v1/payments/confirm", &l5);
    ck_assert(!same_scope(base, l0, sk, l1));
    ck_assert(!same_scope(base, l0, key, l2));
    ck_assert(!same_scope(base, l0, method, l3));
    ck_assert(!same_scope(base, l0, path, l4));
    ck_assert(same_scope(base, l0, same, l5));
    free(base);
    free(sk);
    free(key);
    free(method);
    free(path);
    free(same);
}
END_TEST

START_TEST(test_idem_scope_parts_cannot_be_confused_by_concatenation)
{
    size_t la, lb, lc, ld, le, lf;
    char *a = idem_scope("ab", "c", "POST", "/p", &la);
    char *b = idem_scope("a", "bc", "POST", "/p", &lb);
    char *c = idem_scope("sk", "kPOST", "", "/p", &lc);
    char *d = idem_scope("sk", "k", "POST", "/p", &ld);
    char *e = idem_scope("sk", "k", "POS", "T/p", &le);
    char *f = idem_scope("", "", "", "", &lf);
    ck_assert(!same_scope(a, la, b, lb));
    ck_assert(!same_scope(c, lc, d, ld));
    ck_assert(!same_scope(d, ld, e, le));
    ck_assert_uint_eq(lf, 3); /* three separators */
    /* As store keys, too. */
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int o1, o2;
    struct idem_record *ra = idem_claim(&s, a, la, &o1, 1, T0);
    ck_assert_ptr_null(idem_lookup(&s, b, lb, T0));
    struct idem_record *rb = idem_claim(&s, b, lb, &o2, 2, T0);
    ck_assert_ptr_ne(ra, rb);
    ck_assert_ptr_eq(idem_lookup(&s, a, la, T0), ra);
    ck_assert_ptr_eq(idem_lookup(&s, b, lb, T0), rb);
    ck_assert_uint_eq(idem_count(&s), 2);
    idem_fini(&s);
    free(a);
    free(b);
    free(c);
    free(d);
    free(e);
    free(f);
}
END_TEST

START_TEST(test_idem_reset_empties_store)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    int owner;
    char key[16];
    char *scopes[20];
    size_t lens[20];
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof key, "k%d", i);
        scopes[i] = scope_of(key, &lens[i]);
        struct idem_record *r = idem_claim(&s, scopes[i], lens[i], &owner, 1, T0);
        ck_assert_ptr_nonnull(r);
        if (i % 2) {
            struct idem_response resp = body_resp(200, "done");
            ck_assert_int_eq(idem_complete(r, &owner, &resp), 0);
        }
    }
    ck_assert_uint_eq(idem_count(&s), 20);
    idem_reset(&s);
    ck_assert_uint_eq(idem_count(&s), 0);
    for (int i = 0; i < 20; i++)
        ck_assert_ptr_null(idem_lookup(&s, scopes[i], lens[i], T0));
    /* Usable after reset. */
    ck_assert_ptr_nonnull(idem_claim(&s, scopes[0], lens[0], &owner, 1, T0));
    ck_assert_uint_eq(idem_count(&s), 1);
    for (int i = 0; i < 20; i++)
        free(scopes[i]);
    idem_fini(&s);
}
END_TEST

#define MANY 10000

START_TEST(test_idem_ten_thousand_records_inserted_and_found)
{
    struct idem_store s;
    idem_init(&s, TTL_NS);
    static int owners[MANY];
    static struct idem_record *recs[MANY];
    char key[32];
    for (int i = 0; i < MANY; i++) {
        size_t len;
        snprintf(key, sizeof key, "idem-%05d", i);
        char *sc = scope_of(key, &len);
        ck_assert_ptr_null(idem_lookup(&s, sc, len, T0));
        recs[i] = idem_claim(&s, sc, len, &owners[i], (uint64_t)i, T0);
        ck_assert_ptr_nonnull(recs[i]);
        free(sc);
    }
    ck_assert_uint_eq(idem_count(&s), MANY);
    /* Complete the even ones, release every third odd one. */
    size_t released = 0;
    for (int i = 0; i < MANY; i++) {
        if (i % 2 == 0) {
            struct idem_response resp = body_resp(200, "x");
            ck_assert_int_eq(idem_complete(recs[i], &owners[i], &resp), 0);
        } else if (i % 3 == 0) {
            ck_assert_int_eq(idem_release(&s, recs[i], &owners[i]), 0);
            recs[i] = NULL;
            released++;
        }
    }
    ck_assert_uint_eq(idem_count(&s), MANY - released);
    for (int i = 0; i < MANY; i++) {
        size_t len;
        snprintf(key, sizeof key, "idem-%05d", i);
        char *sc = scope_of(key, &len);
        struct idem_record *r = idem_lookup(&s, sc, len, T0 + 1);
        ck_assert_ptr_eq(r, recs[i]);
        if (r) {
            ck_assert_uint_eq(r->body_hash, (uint64_t)i);
            ck_assert_int_eq(r->state, i % 2 == 0 ? IDEM_DONE : IDEM_PROCESSING);
        }
        free(sc);
    }
    idem_fini(&s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *s = suite_create("idem");
    TCase *own = tcase_create("ownership");
    tcase_add_test(own, test_idem_claim_creates_processing_owned_by_claimer);
    tcase_add_test(own, test_idem_lookup_returns_claimed_record_and_null_for_unknown_scope);
    tcase_add_test(own, test_idem_second_request_sees_processing_with_first_owner);
    tcase_add_test(own, test_idem_non_owner_cannot_complete);
    tcase_add_test(own, test_idem_owner_completes_to_done_and_record_owns_body);
    tcase_add_test(own, test_idem_complete_keeps_payment_view_fields);
    tcase_add_test(own, test_idem_done_record_cannot_be_completed_or_released_again);
    tcase_add_test(own, test_idem_non_owner_cannot_release);
    tcase_add_test(own, test_idem_owner_release_deletes_record);
    suite_add_tcase(s, own);

    TCase *ttl = tcase_create("ttl");
    tcase_add_test(ttl, test_idem_done_record_expires_at_ttl);
    tcase_add_test(ttl, test_idem_processing_record_never_expires);
    tcase_add_test(ttl, test_idem_claim_replaces_expired_record_not_looked_up);
    tcase_add_test(ttl, test_idem_sweep_frees_expired_done_records_oldest_first_and_stops_at_a_live_one);
    tcase_add_test(ttl, test_idem_sweep_looks_at_no_more_than_its_budget);
    tcase_add_test(ttl, test_idem_sweep_passes_over_a_processing_record_and_frees_it_once_done);
    tcase_add_test(ttl, test_idem_sweep_after_lookups_replacements_and_reset_keeps_the_list_whole);
    suite_add_tcase(s, ttl);

    TCase *scope = tcase_create("scope");
    tcase_add_test(scope, test_idem_scope_is_parts_joined_by_nul);
    tcase_add_test(scope, test_idem_scope_differs_by_each_part);
    tcase_add_test(scope, test_idem_scope_parts_cannot_be_confused_by_concatenation);
    suite_add_tcase(s, scope);

    TCase *store = tcase_create("store");
    tcase_add_test(store, test_idem_reset_empties_store);
    tcase_add_test(store, test_idem_claim_beyond_max_records_is_refused_until_an_expired_one_is_freed);
    tcase_add_test(store, test_idem_ten_thousand_records_inserted_and_found);
    suite_add_tcase(s, store);
    return s;
}
