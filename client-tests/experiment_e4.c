/* experiment_e4.c -- E4: the naive and the reference webhook consumer (reconcile.h) over the same
 * deliveries, judged against the ledger, with the profile's webhook faults (delay, duplicate,
 * drop; docs/webhooks.md §6.5) and without them. One fakegate and one receiver for both runs;
 * the consumers run once a run's deliveries have all settled, over what the receiver recorded in
 * arrival order, so both see exactly the same list. */
#define _POSIX_C_SOURCE 200809L
#include "experiment.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "receiver.h"
#include "reconcile.h"

#define SETTLE_TIMEOUT_MS 30000
#define ID_LEN 64

/* Model times (× the scale): the webhook delay window and the duplicate's lag, and the gap
 * between a confirm and its cancel: short enough for the DONE and the cancel's event to cross
 * (P(DONE's delay > gap + the cancel's delay) ≈ 0.3), long enough for them not to cross when
 * nothing delays them. */
#define DELAY_MAX_MS 400
#define DUP_AFTER_MAX_MS 300
#define GAP_MIN_MS 40
#define GAP_MAX_MS 150
#define DUPLICATE_P 0.2
#define DROP_P 0.05

/* The API answers at once in both runs; only the webhooks section differs. */
#define NO_API_LATENCY "\"routes\":{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}"

static void set_err(char err[EX_ERR_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_err(char err[EX_ERR_LEN], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, EX_ERR_LEN, fmt, ap);
    va_end(ap);
}

static int call(const fg_server *s, const char *method, const char *path, const char *body,
                const char *auth, fg_response *r)
{
    const char *headers[] = {auth, NULL};
    fg_request req;
    memset(&req, 0, sizeof req);
    req.method = method;
    req.path = path;
    req.body = body;
    req.headers = auth ? headers : NULL;
    req.timeout_ms = 10000;
    return fg_http(s, NULL, &req, r);
}

/* ---- one run --------------------------------------------------------------------------------- */

typedef struct payment {
    char order_id[ID_LEN];
    char payment_key[ID_LEN];
} payment;

/* The run's profile at scale 1: the faults of the brief, or none. */
static void profile_text(bool faults, char *buf, size_t size)
{
    if (faults)
        snprintf(buf, size,
                 "{\"name\":\"e4-webhook-faults\"," NO_API_LATENCY ",\"webhooks\":{"
                 "\"delay\":{\"dist\":\"uniform\",\"min_ms\":0,\"max_ms\":%d},"
                 "\"duplicate\":{\"p\":%g,\"after\":{\"dist\":\"uniform\",\"min_ms\":0,"
                 "\"max_ms\":%d}},\"drop\":{\"p\":%g}}}",
                 DELAY_MAX_MS, DUPLICATE_P, DUP_AFTER_MAX_MS, DROP_P);
    else
        snprintf(buf, size, "{\"name\":\"e4-no-faults\"," NO_API_LATENCY "}");
}

/* POST /__admin/reset {"profile": <profile ×scale>}: a fresh ledger and deliveries journal. */
static int reset_with(const fg_server *s, const char *profile, double scale,
                      char err[EX_ERR_LEN])
{
    json_t *base = json_loads(profile, 0, NULL);
    json_t *body = json_pack("{s:o}", "profile", ex_scale_profile(base, scale));
    json_decref(base);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    fg_response r;
    int rc = call(s, "POST", "/__admin/reset", text, NULL, &r) == 0 && r.status == 200 ? 0 : -1;
    if (rc != 0)
        set_err(err, "POST /__admin/reset: %ld %s%s", r.status, r.curl_error, r.body);
    fg_response_fini(&r);
    free(text);
    return rc;
}

/* Confirm every payment; cancel a third partly and a third fully, GAP ms after the confirm.
 * Counts the events fakegate must file into w. */
static int drive(const fg_server *s, const ex_options *o, const char *tag, payment *pays,
                 ex_wh_result *w, char err[EX_ERR_LEN])
{
    rc_rng rng;
    rc_rng_seed(&rng, o->seed); /* the same gaps in both runs */
    for (int i = 0; i < o->e4_payments; i++) {
        payment *p = &pays[i];
        snprintf(p->order_id, sizeof p->order_id, "e4-%s-%06d", tag, i);
        snprintf(p->payment_key, sizeof p->payment_key, "pk_e4_%s_%06d", tag, i);
        fg_response r;
        fg_confirm(s, p->payment_key, p->order_id, 15000, NULL, &r);
        long st = r.status;
        fg_response_fini(&r);
        if (st != 200) {
            set_err(err, "confirm %s: status %ld", p->order_id, st);
            return -1;
        }
        w->payments++;
        w->events++;
        int kind = i % 3; /* 0: kept, 1: partial cancel, 2: full cancel */
        if (kind == 0)
            continue;
        fg_pause_ms((long)(rc_rng_range(&rng, GAP_MIN_MS, GAP_MAX_MS) * o->scale + 0.5));
        char path[128];
        snprintf(path, sizeof path, "/v1/payments/%s/cancel", p->payment_key);
        const char *body = kind == 1 ? "{\"cancelReason\":\"고객 변심\",\"cancelAmount\":5000}"
                                     : "{\"cancelReason\":\"고객 변심\"}";
        call(s, "POST", path, body, s->auth_header, &r);
        st = r.status;
        fg_response_fini(&r);
        if (st != 200) {
            set_err(err, "cancel %s: status %ld", p->order_id, st);
            return -1;
        }
        if (kind == 1)
            w->partial_cancels++;
        else
            w->full_cancels++;
        w->events++;
    }
    return 0;
}

/* GET /__admin/webhooks/deliveries[?query]: the "deliveries" array (caller owns it), or NULL. */
static json_t *deliveries(const fg_server *s, const char *query)
{
    char path[128];
    snprintf(path, sizeof path, "/__admin/webhooks/deliveries%s", query);
    fg_response r;
    call(s, "GET", path, NULL, NULL, &r);
    json_t *list = r.status == 200 ? json_incref(json_object_get(r.json, "deliveries")) : NULL;
    fg_response_fini(&r);
    return list;
}

/* Poll the deliveries journal until it holds every event and none is pending; count what the
 * profile did to them. Returns the number delivered, or -1 on timeout. */
static long wait_settled(const fg_server *s, ex_wh_result *w, char err[EX_ERR_LEN])
{
    int64_t deadline = fg_now_ms() + SETTLE_TIMEOUT_MS;
    long originals = 0, pending = 0;
    while (fg_now_ms() < deadline) {
        json_t *some = deliveries(s, "?status=pending&limit=1");
        pending = some ? (long)json_array_size(some) : 1;
        json_decref(some);
        if (pending > 0) {
            fg_pause_ms(20);
            continue;
        }
        json_t *all = deliveries(s, "");
        long delivered = 0;
        originals = w->duplicates_filed = w->dropped = 0;
        size_t i;
        json_t *d;
        json_array_foreach(all, i, d) {
            const char *st = fg_json_str(d, "status");
            if (json_is_null(json_object_get(d, "duplicate_of")))
                originals++;
            else
                w->duplicates_filed++;
            pending += st && strcmp(st, "pending") == 0;
            delivered += st && strcmp(st, "delivered") == 0;
            w->dropped += st && strcmp(st, "dropped") == 0;
        }
        json_decref(all);
        /* an event reaches the journal a moment after its transition: wait for all of them */
        if (originals >= w->events && pending == 0)
            return delivered;
        fg_pause_ms(20);
    }
    set_err(err, "deliveries did not settle in %d ms: %ld of %ld events filed, %ld pending",
            SETTLE_TIMEOUT_MS, originals, w->events, pending);
    return -1;
}

static bool is_cancel(const char *status)
{
    return status && (strcmp(status, "CANCELED") == 0 || strcmp(status, "PARTIAL_CANCELED") == 0);
}

/* One received delivery as the judge needs it. */
typedef struct arrival {
    const char *transmission_id;
    char payment_key[ID_LEN];
    char status[RCN_STATUS_LEN];
} arrival;

static void read_arrival(const struct rx_request *d, arrival *a)
{
    json_t *body = json_loadb(d->body, d->body_len, 0, NULL);
    json_t *data = json_object_get(body, "data");
    const char *pk = fg_json_str(data, "paymentKey"), *st = fg_json_str(data, "status");
    a->transmission_id = d->transmission_id;
    snprintf(a->payment_key, sizeof a->payment_key, "%s", pk ? pk : "");
    snprintf(a->status, sizeof a->status, "%s", st ? st : "");
    json_decref(body);
}

/* Did a DONE of `payment_key` arrive after one of its cancels? */
static bool done_after_cancel(const arrival *a, size_t n, const char *payment_key)
{
    bool cancel_seen = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(a[i].payment_key, payment_key) != 0)
            continue;
        if (cancel_seen && strcmp(a[i].status, "DONE") == 0)
            return true;
        cancel_seen = cancel_seen || is_cancel(a[i].status);
    }
    return false;
}

/* What the stream did, whoever consumes it: duplicates received, and payments whose DONE
 * arrived after one of their cancels. */
static void stream_stats(const arrival *a, size_t n, const payment *pays, ex_wh_result *w)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            if (a[i].transmission_id && a[j].transmission_id &&
                strcmp(a[i].transmission_id, a[j].transmission_id) == 0) {
                w->duplicates_received++;
                break;
            }
    for (long k = 0; k < w->payments; k++)
        w->reordered += done_after_cancel(a, n, pays[k].payment_key);
}

/* Judge one consumer's table against the ledger; `by_order_id` says how it is keyed. */
static void judge(const rcn_table *t, bool by_order_id, const json_t *ledger, const arrival *a,
                  size_t n, ex_wh_result *w)
{
    size_t i;
    json_t *entry;
    json_array_foreach(ledger, i, entry) {
        const json_t *p = json_object_get(entry, "payment");
        const char *oid = fg_json_str(p, "orderId"), *pk = fg_json_str(p, "paymentKey");
        const char *st = fg_json_str(p, "status");
        if (!oid || !pk || !st)
            continue;
        bool approved = rcn_approved(p);
        const rcn_order *o = by_order_id ? rcn_by_order_id(t, oid) : rcn_by_payment_key(t, pk);
        if (!o) {
            w->missed++;
            w->side_effect_never += approved;
            continue;
        }
        w->side_effect_twice += o->side_effects > 1;
        w->side_effect_never += approved && o->side_effects == 0;
        w->polled += o->polled;
        if (strcmp(o->status, st) == 0)
            continue;
        w->wrong_status++;
        /* stale: DONE because a DONE arrived after a cancel (not because a cancel never came) */
        w->stale += strcmp(o->status, "DONE") == 0 && is_cancel(st) &&
                    done_after_cancel(a, n, pk);
    }
}

static void fill_e4_row(ex_row *row, const ex_options *o, const char *condition, bool faults,
                        const char *consumer, const ex_wh_result *w)
{
    memset(row, 0, sizeof *row);
    snprintf(row->experiment, sizeof row->experiment, "E4");
    snprintf(row->condition, sizeof row->condition, "%s", condition);
    snprintf(row->policy, sizeof row->policy, "%s", consumer);
    char scaled[48] = "";
    if (o->scale != 1.0)
        snprintf(scaled, sizeof scaled, " (a copy with every duration ×%g)", o->scale);
    if (faults)
        snprintf(row->profile, sizeof row->profile,
                 "inline, no API latency; webhooks delay U(0–%d ms), duplicate p %g after "
                 "U(0–%d ms), drop p %g%s, by POST /__admin/reset {\"profile\": ...}",
                 DELAY_MAX_MS, DUPLICATE_P, DUP_AFTER_MAX_MS, DROP_P, scaled);
    else
        snprintf(row->profile, sizeof row->profile,
                 "inline, no API latency, no webhooks section, by POST /__admin/reset "
                 "{\"profile\": ...}");
    row->scale = o->scale;
    row->seed = o->seed;
    row->retry_success_rate = -1;
    row->wh = *w;
}

/* One run: reset with the profile, make the payments, wait for every delivery to settle, feed
 * what arrived to both consumers, let the reference reconcile, judge both. Appends 2 rows. */
static int run_condition(const fg_server *s, struct receiver *rx, const ex_options *o,
                         const char *condition, bool faults, ex_table *t, char err[EX_ERR_LEN])
{
    if (t->n + 2 > EX_MAX_ROWS) {
        set_err(err, "too many rows");
        return -1;
    }
    int64_t t0 = fg_now_ns();
    ex_wh_result w;
    memset(&w, 0, sizeof w);
    size_t n_pays = (size_t)o->e4_payments;
    payment *pays = calloc(n_pays, sizeof *pays);
    rcn_known *known = calloc(n_pays, sizeof *known);
    struct rx_request *got = NULL;
    arrival *arr = NULL;
    json_t *ledger = NULL;
    char base_url[64], profile[1024];
    snprintf(base_url, sizeof base_url, "http://127.0.0.1:%d", s->port);
    profile_text(faults, profile, sizeof profile);
    rcn_table naive;
    rcn_ref ref;
    rcn_table_init(&naive);
    int rc = rcn_ref_init(&ref, base_url, s->auth_header);
    size_t first = receiver_count(rx), n = 0;
    long delivered = -1;
    if (!pays || !known || rc != 0) {
        set_err(err, "out of memory");
        rc = -1;
    }
    if (rc == 0)
        rc = reset_with(s, profile, o->scale, err);
    if (rc == 0)
        rc = drive(s, o, faults ? "f" : "c", pays, &w, err);
    if (rc == 0 && (delivered = wait_settled(s, &w, err)) < 0)
        rc = -1;
    if (rc == 0) {
        /* fakegate counts a delivery once the receiver answered: it has recorded it by then */
        n = receiver_wait(rx, first + (size_t)delivered, 5000) - first;
        got = calloc(n ? n : 1, sizeof *got);
        arr = calloc(n ? n : 1, sizeof *arr);
        for (size_t i = 0; got && arr && i < n; i++) {
            receiver_get(rx, first + i, &got[i]);
            read_arrival(&got[i], &arr[i]);
        }
        w.received = (long)n;
        ledger = fg_admin_payments(s, NULL);
        if (!got || !arr || !ledger || n != (size_t)delivered) {
            set_err(err, "%s: %zu deliveries received, fakegate delivered %ld", condition, n,
                    delivered);
            rc = -1;
        }
    }
    if (rc == 0) {
        for (size_t i = 0; i < n; i++) {
            rcn_naive_on_webhook(&naive, &got[i]);
            rcn_ref_on_webhook(&ref, &got[i]);
        }
        for (size_t i = 0; i < n_pays; i++)
            known[i] = (rcn_known){pays[i].order_id, pays[i].payment_key};
        rcn_ref_reconcile(&ref, known, n_pays);
        stream_stats(arr, n, pays, &w);
        w.wall_s = (double)(fg_now_ns() - t0) / 1e9;
        ex_row *nr = &t->rows[t->n++], *rr = &t->rows[t->n++];
        fill_e4_row(nr, o, condition, faults, "naive", &w);
        judge(&naive, true, ledger, arr, n, &nr->wh);
        fill_e4_row(rr, o, condition, faults, "reference", &w);
        judge(&ref.orders, false, ledger, arr, n, &rr->wh);
        rr->wh.read_backs = ref.read_backs;
        rr->wh.duplicates_ignored = ref.duplicates_ignored;
        if (o->verbose) {
            ex_print_row(stdout, nr);
            ex_print_row(stdout, rr);
        }
    }
    json_decref(ledger);
    free(arr);
    free(got);
    rcn_ref_fini(&ref);
    rcn_table_fini(&naive);
    free(known);
    free(pays);
    return rc;
}

/* ---- E4 -------------------------------------------------------------------------------------- */

int ex_run_e4(const ex_options *o, ex_table *t, char err[EX_ERR_LEN])
{
    int64_t t0 = fg_now_ns();
    if (o->e4_payments < 3 || o->e4_payments > 3000) {
        /* ~2 deliveries per payment, and the deliveries journal keeps the last 10 000 */
        set_err(err, "E4 takes 3 ... 3000 payments per run, not %d", o->e4_payments);
        return -1;
    }
    struct rx_answer ok = {RX_STATUS, 200};
    struct receiver *rx = receiver_start(&ok, 1);
    if (!rx) {
        set_err(err, "the webhook receiver did not start");
        return -1;
    }
    char seed[32], ferr[FG_ERR_LEN];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    const char *args[] = {"--seed", seed, "--webhook-url", receiver_url(rx), NULL};
    fg_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.args = args;
    fg_server *s = fg_start(&opts, ferr);
    int rc = 0;
    if (!s) {
        set_err(err, "fakegate did not start: %s", ferr);
        rc = -1;
    }
    if (rc == 0 && o->verbose)
        ex_print_webhook_header(stdout);
    if (rc == 0)
        rc = run_condition(s, rx, o, "webhook-faults", true, t, err);
    if (rc == 0)
        rc = run_condition(s, rx, o, "no-faults", false, t, err);
    fg_free(s);
    receiver_stop(rx);
    t->wall_s += (double)(fg_now_ns() - t0) / 1e9;
    return rc;
}
