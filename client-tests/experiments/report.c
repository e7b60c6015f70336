/* report.c -- see report.h. results.json is the record: RESULTS.md is rendered from the rows in
 * the table, and rp_merge_json reads rows back from results.json losslessly (every key the writer
 * puts, through the same names), so a section re-rendered from it is the section it was. The
 * figures RESULTS.md shows (e1.svg ... e3.svg) are drawn from results.json by plot.sh. */
#define _POSIX_C_SOURCE 200809L
#include "report.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const EXPERIMENTS[RP_EXPERIMENTS] = {"E1", "E2", "E3", "E4"};

int rp_experiment_index(const char *experiment)
{
    for (int k = 0; k < RP_EXPERIMENTS; k++)
        if (strcmp(experiment, EXPERIMENTS[k]) == 0)
            return k;
    return -1;
}

/* A number of an ex_row under its results.json key: the reader's map, and the writer's for E4. */
typedef struct field {
    const char *key;
    size_t off;
    bool is_long;  /* long, else double */
} field;

#define LONG_FIELD(k, m) {k, offsetof(ex_row, m), true}
#define REAL_FIELD(k, m) {k, offsetof(ex_row, m), false}

/* E1-E3: the numbers e123_row writes that are stored (failure_rate and the phases' attempts per
 * request are computed from these; the strings, seed and retry_success_rate are read apart). */
static const field LOAD_FIELDS[] = {
    REAL_FIELD("rate_per_s", rate_per_s),
    REAL_FIELD("duration_s", duration_s),
    REAL_FIELD("timeout_ms", timeout_ms),
    LONG_FIELD("requests", res.requests),
    LONG_FIELD("successes", res.successes),
    LONG_FIELD("failed", res.failed),
    LONG_FIELD("failed_cap", res.failed_cap),
    LONG_FIELD("failed_declined", res.failed_declined),
    LONG_FIELD("failed_refused", res.failed_refused),
    LONG_FIELD("failed_breaker", res.failed_breaker),
    LONG_FIELD("failed_reconciled", res.failed_reconciled),
    LONG_FIELD("unknown", res.unknown),
    LONG_FIELD("unknown_resolved", res.unknown_resolved),
    LONG_FIELD("resends_sent", res.resends_sent),
    LONG_FIELD("resends_skipped", res.resends_skipped),
    LONG_FIELD("attempts_sent", res.attempts_sent),
    LONG_FIELD("gateway_arrivals", gateway_arrivals),
    REAL_FIELD("p50_confirm_ms", res.p50_ms),
    REAL_FIELD("p95_confirm_ms", res.p95_ms),
    LONG_FIELD("requests_with_5xx", res.got_5xx),
    LONG_FIELD("saved_by_retry", res.saved_5xx),
    LONG_FIELD("unknown_unresolved", res.unknown_unresolved),
    LONG_FIELD("resends_no_slot", res.resends_no_slot),
    LONG_FIELD("timeouts", res.timeouts),
    LONG_FIELD("conflicts_409", res.conflicts),
    LONG_FIELD("breaker_opens", res.breaker_opens),
    LONG_FIELD("breaker_rejected", res.breaker_rejected),
    REAL_FIELD("wall_s", res.wall_s),
};

/* E4: every number of ex_wh_result, in this order, under the field's own name. */
static const field WEBHOOK_FIELDS[] = {
    LONG_FIELD("payments", wh.payments),
    LONG_FIELD("partial_cancels", wh.partial_cancels),
    LONG_FIELD("full_cancels", wh.full_cancels),
    LONG_FIELD("events", wh.events),
    LONG_FIELD("duplicates_filed", wh.duplicates_filed),
    LONG_FIELD("dropped", wh.dropped),
    LONG_FIELD("received", wh.received),
    LONG_FIELD("duplicates_received", wh.duplicates_received),
    LONG_FIELD("reordered", wh.reordered),
    LONG_FIELD("wrong_status", wh.wrong_status),
    LONG_FIELD("stale", wh.stale),
    LONG_FIELD("side_effect_twice", wh.side_effect_twice),
    LONG_FIELD("side_effect_never", wh.side_effect_never),
    LONG_FIELD("missed", wh.missed),
    LONG_FIELD("polled", wh.polled),
    LONG_FIELD("read_backs", wh.read_backs),
    LONG_FIELD("duplicates_ignored", wh.duplicates_ignored),
    REAL_FIELD("wall_s", wh.wall_s),
};

#define N_FIELDS(a) (sizeof(a) / sizeof(a)[0])

static json_t *e123_row(const ex_row *r, double experiment_wall_s)
{
    const lg_result *x = &r->res;
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:f,s:I,s:f,s:f,s:f,s:I,s:f,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,"
        "s:I,s:I,s:I,s:I,s:f,s:f}",
        "experiment", r->experiment, "condition", r->condition, "policy", r->policy,
        "profile", r->profile, "scale", r->scale, "seed", (json_int_t)r->seed,
        "rate_per_s", r->rate_per_s, "duration_s", r->duration_s, "timeout_ms", r->timeout_ms,
        "requests", (json_int_t)x->requests, "failure_rate", lg_failure_rate(x),
        "successes", (json_int_t)x->successes, "failed", (json_int_t)x->failed,
        "failed_cap", (json_int_t)x->failed_cap, "failed_declined",
        (json_int_t)x->failed_declined, "failed_refused", (json_int_t)x->failed_refused,
        "failed_breaker", (json_int_t)x->failed_breaker, "failed_reconciled",
        (json_int_t)x->failed_reconciled, "unknown", (json_int_t)x->unknown,
        "unknown_resolved", (json_int_t)x->unknown_resolved, "resends_sent",
        (json_int_t)x->resends_sent, "resends_skipped", (json_int_t)x->resends_skipped,
        "attempts_sent", (json_int_t)x->attempts_sent, "gateway_arrivals",
        (json_int_t)r->gateway_arrivals, "p50_confirm_ms", x->p50_ms, "p95_confirm_ms",
        x->p95_ms);
    json_object_set_new(o, "retry_success_rate",
                        r->retry_success_rate >= 0 ? json_real(r->retry_success_rate)
                                                   : json_null());
    json_object_set_new(o, "requests_with_5xx", json_integer(x->got_5xx));
    json_object_set_new(o, "saved_by_retry", json_integer(x->saved_5xx));
    json_object_set_new(o, "unknown_unresolved", json_integer(x->unknown_unresolved));
    json_object_set_new(o, "resends_no_slot", json_integer(x->resends_no_slot));
    json_object_set_new(o, "timeouts", json_integer(x->timeouts));
    json_object_set_new(o, "conflicts_409", json_integer(x->conflicts));
    json_object_set_new(o, "breaker_opens", json_integer(x->breaker_opens));
    json_object_set_new(o, "breaker_rejected", json_integer(x->breaker_rejected));
    json_object_set_new(o, "wall_s", json_real(x->wall_s));
    json_object_set_new(o, "experiment_wall_s", json_real(experiment_wall_s));
    if (r->n_phases > 0) {
        json_t *ph = json_array();
        for (size_t k = 0; k < r->n_phases; k++) {
            const lg_phase *p = &x->phases[k];
            json_array_append_new(
                ph, json_pack("{s:s,s:f,s:I,s:I,s:f,s:I,s:I,s:I,s:I}", "phase",
                              r->phase_names[k], "start_s", r->phase_start_s[k], "requests",
                              (json_int_t)p->requests, "attempts_sent",
                              (json_int_t)p->attempts_sent, "attempts_per_request",
                              ex_phase_attempts_per_request(r, k), "gateway_arrivals",
                              (json_int_t)r->phase_gateway_arrivals[k], "successes",
                              (json_int_t)p->successes, "failed", (json_int_t)p->failed,
                              "breaker_rejected", (json_int_t)p->breaker_rejected));
        }
        json_object_set_new(o, "phases", ph);
    }
    if (r->n_seconds > 0) {
        json_t *per_s = json_array();
        for (size_t k = 0; k < r->n_seconds; k++)
            json_array_append_new(per_s, json_integer(r->arrivals_per_s[k]));
        json_object_set_new(o, "arrivals_per_s", per_s);
    }
    return o;
}

static json_t *e4_row(const ex_row *r, double experiment_wall_s)
{
    json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:f,s:I}", "experiment", r->experiment, "condition",
                          r->condition, "policy", r->policy, "profile", r->profile, "scale",
                          r->scale, "seed", (json_int_t)r->seed);
    for (size_t i = 0; i < N_FIELDS(WEBHOOK_FIELDS); i++) {
        const field *f = &WEBHOOK_FIELDS[i];
        const char *p = (const char *)r + f->off;
        json_object_set_new(o, f->key, f->is_long ? json_integer(*(const long *)(const void *)p)
                                                  : json_real(*(const double *)(const void *)p));
    }
    json_object_set_new(o, "experiment_wall_s", json_real(experiment_wall_s));
    return o;
}

int rp_write_json(const char *path, const ex_table *t, const rp_timing *timing)
{
    json_t *arr = json_array();
    /* experiment by experiment, whatever order they ran or were kept in */
    for (int k = 0; k < RP_EXPERIMENTS; k++)
        for (size_t i = 0; i < t->n; i++) {
            const ex_row *r = &t->rows[i];
            if (rp_experiment_index(r->experiment) != k)
                continue;
            double wall = timing->wall_s[k];
            json_array_append_new(arr, k == 3 ? e4_row(r, wall) : e123_row(r, wall));
        }
    int rc = json_dump_file(arr, path, JSON_INDENT(2) | JSON_ENSURE_ASCII) == 0 ? 0 : -1;
    json_decref(arr);
    return rc;
}

/* ---- reading results.json back (--only) ------------------------------------------------------ */

static void set_err(char err[EX_ERR_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_err(char err[EX_ERR_LEN], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, EX_ERR_LEN, fmt, ap);
    va_end(ap);
}

static void read_fields(const json_t *o, const field *fields, size_t n, ex_row *r)
{
    for (size_t i = 0; i < n; i++) {
        char *p = (char *)r + fields[i].off;
        const json_t *v = json_object_get(o, fields[i].key);
        if (fields[i].is_long)
            *(long *)(void *)p = (long)json_integer_value(v);
        else
            *(double *)(void *)p = json_number_value(v);
    }
}

static void read_phases(const json_t *phases, ex_row *r)
{
    size_t k;
    json_t *ph;
    json_array_foreach(phases, k, ph) {
        if (k >= LG_MAX_PHASES)
            break;
        lg_phase *p = &r->res.phases[k];
        const char *name = json_string_value(json_object_get(ph, "phase"));
        snprintf(r->phase_names[k], sizeof r->phase_names[k], "%s", name ? name : "");
        r->phase_start_s[k] = json_number_value(json_object_get(ph, "start_s"));
        p->requests = (long)json_integer_value(json_object_get(ph, "requests"));
        p->attempts_sent = (long)json_integer_value(json_object_get(ph, "attempts_sent"));
        r->phase_gateway_arrivals[k] =
            (long)json_integer_value(json_object_get(ph, "gateway_arrivals"));
        p->successes = (long)json_integer_value(json_object_get(ph, "successes"));
        p->failed = (long)json_integer_value(json_object_get(ph, "failed"));
        p->breaker_rejected = (long)json_integer_value(json_object_get(ph, "breaker_rejected"));
        r->n_phases = k + 1;
    }
}

static void read_per_second(const json_t *per_s, ex_row *r)
{
    size_t k;
    json_t *n;
    json_array_foreach(per_s, k, n) {
        if (k >= EX_MAX_SECONDS)
            break;
        r->arrivals_per_s[k] = (long)json_integer_value(n);
        r->n_seconds = k + 1;
    }
}

/* One results.json object back into an ex_row. */
static void read_row(const json_t *o, int k, ex_row *r)
{
    memset(r, 0, sizeof *r);
    static const struct {
        const char *key;
        size_t off, size;
    } strings[] = {
        {"experiment", offsetof(ex_row, experiment), sizeof r->experiment},
        {"condition", offsetof(ex_row, condition), sizeof r->condition},
        {"policy", offsetof(ex_row, policy), sizeof r->policy},
        {"profile", offsetof(ex_row, profile), sizeof r->profile},
    };
    for (size_t i = 0; i < N_FIELDS(strings); i++) {
        const char *v = json_string_value(json_object_get(o, strings[i].key));
        snprintf((char *)r + strings[i].off, strings[i].size, "%s", v ? v : "");
    }
    r->scale = json_number_value(json_object_get(o, "scale"));
    r->seed = (uint64_t)json_integer_value(json_object_get(o, "seed"));
    r->retry_success_rate = -1;
    if (k == 3) {
        read_fields(o, WEBHOOK_FIELDS, N_FIELDS(WEBHOOK_FIELDS), r);
        return;
    }
    read_fields(o, LOAD_FIELDS, N_FIELDS(LOAD_FIELDS), r);
    const json_t *rate = json_object_get(o, "retry_success_rate");
    if (json_is_number(rate))
        r->retry_success_rate = json_number_value(rate);
    /* loadgen.h: unknown_resolved = resolved as charged + failed_reconciled */
    r->res.unknown_resolved_success = r->res.unknown_resolved - r->res.failed_reconciled;
    read_phases(json_object_get(o, "phases"), r);
    read_per_second(json_object_get(o, "arrivals_per_s"), r);
}

int rp_merge_json(const char *path, ex_table *t, rp_timing *timing, char err[EX_ERR_LEN])
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0; /* nothing recorded yet: nothing to keep */
    json_error_t je;
    json_t *arr = json_loadf(f, 0, &je);
    fclose(f);
    if (!json_is_array(arr)) {
        set_err(err, "%s:%d:%d: %s", path, je.line, je.column,
                arr ? "expected an array of rows" : je.text);
        json_decref(arr);
        return -1;
    }
    int rc = 0;
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        const char *e = json_string_value(json_object_get(o, "experiment"));
        int k = e ? rp_experiment_index(e) : -1;
        if (k < 0 || (timing->ran[k] && !timing->kept[k]))
            continue; /* unknown, or it ran now: its new rows replace these */
        const json_t *wall = json_object_get(o, "experiment_wall_s");
        if (!json_is_number(wall)) {
            set_err(err, "%s: row %zu (%s) has no experiment_wall_s: run every experiment once",
                    path, i, e);
            rc = -1;
            break;
        }
        if (t->n >= EX_MAX_ROWS) {
            set_err(err, "%s: more than %d rows", path, EX_MAX_ROWS);
            rc = -1;
            break;
        }
        read_row(o, k, &t->rows[t->n++]);
        timing->ran[k] = timing->kept[k] = true;
        timing->wall_s[k] = json_number_value(wall);
    }
    json_decref(arr);
    return rc;
}

/* ---- RESULTS.md ------------------------------------------------------------------------------ */

static double pct(const ex_row *r)
{
    return r ? 100.0 * lg_failure_rate(&r->res) : 0;
}

static const char *row_pct(char *buf, size_t n, const ex_row *r)
{
    if (!r)
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, "%.2f %%", pct(r));
    return buf;
}

static double ratio_pct(long a, long b)
{
    return b > 0 ? 100.0 * ((double)a / (double)b - 1.0) : 0;
}

/* A figure client-tests/plot.sh draws from results.json next to RESULTS.md; `alt` is also the
 * figure's own title there. */
static void md_figure(FILE *f, const char *alt, const char *svg)
{
    fprintf(f, "![%s](%s)\n\n", alt, svg);
}

static void md_rows(FILE *f, const ex_table *t, const char *exp)
{
    fprintf(f, "| condition | policy | requests | gateway calls (sent / fakegate counted) | "
               "successes | failed (cap / declined / refused / breaker / reconciled not charged) | "
               "UNKNOWN → resolved (charged) | resends sent / skipped / no slot | "
               "p50 / p95 confirm (model ms) |\n");
    fprintf(f, "|---|---|---:|---:|---:|---|---|---|---|\n");
    for (size_t i = 0; i < t->n; i++) {
        const ex_row *r = &t->rows[i];
        if (strcmp(r->experiment, exp) != 0)
            continue;
        const lg_result *x = &r->res;
        fprintf(f,
                "| %s | %s | %ld | %ld / %ld | %ld | %ld (%ld / %ld / %ld / %ld / %ld) | %ld → %ld "
                "(%ld) | %ld / %ld / %ld | %.0f / %.0f |\n",
                r->condition, r->policy, x->requests, x->attempts_sent, r->gateway_arrivals,
                x->successes, x->failed, x->failed_cap, x->failed_declined, x->failed_refused,
                x->failed_breaker, x->failed_reconciled, x->unknown, x->unknown_resolved,
                x->unknown_resolved_success, x->resends_sent, x->resends_skipped,
                x->resends_no_slot, x->p50_ms, x->p95_ms);
    }
    fprintf(f, "\n");
}

static void md_e1(FILE *f, const ex_table *t, const ex_options *o, double wall)
{
    const ex_row *l0 = ex_find(t, "E1", "lossy", "no-resend");
    const ex_row *l1 = ex_find(t, "E1", "lossy", "resend-once");
    const ex_row *l2 = ex_find(t, "E1", "lossy", "resend-if-4-free");
    const ex_row *s0 = ex_find(t, "E1", "slow", "no-resend");
    const ex_row *s1 = ex_find(t, "E1", "slow", "resend-once");
    const ex_row *s2 = ex_find(t, "E1", "slow", "resend-if-4-free");
    fprintf(f, "## E1 — resend on timeout vs a lossy and a saturated gateway\n\n");
    if (!l0 || !l1 || !l2 || !s0 || !s1 || !s2) {
        fprintf(f, "Not run in this invocation.\n\n");
        return;
    }
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    long n = l0->res.requests;
    fprintf(f,
            "Setup (as published): %.0f confirms/s for %.0f s (%ld logical payments per run), "
            "open loop; client cap 40 concurrent gateway calls, a first attempt that finds no slot "
            "fails at once; confirm timeout 2 s; on timeout wait 20–60 ms and resend once with the "
            "same Idempotency-Key; a resend that times out (or gets 409) is UNKNOWN; the "
            "reconciler reads `GET /v1/payments/orders/{orderId}` for every UNKNOWN %.0f s (model) "
            "after the last call. Policies: `no-resend`, `resend-once`, `resend-if-4-free` (the "
            "budget: resend only if at least 4 of the 40 slots are free, otherwise count it as "
            "skipped and leave it UNKNOWN).\n\n",
            l0->rate_per_s, l0->duration_s, n, 4.0);
    fprintf(f,
            "Profiles: `lossy` = %s; `slow` = %s. fakegate `--seed %llu`, client seed %llu, "
            "time scale %g. Every policy of a condition uses the same orderIds and keys after a "
            "`POST /__admin/reset`, so fakegate draws the same loss / queue time for the same "
            "payment and attempt in every run (common random numbers). Took %.0f s.\n\n",
            l0->profile, s0->profile, (unsigned long long)o->seed, (unsigned long long)o->seed,
            o->scale, wall);
    double p = 0.142857;
    fprintf(f, "| figure | published | ours | why they differ (or agree) |\n|---|---:|---:|---|\n");
    fprintf(f,
            "| lossy, no resend: final failure rate | 14.29 %% | %s | 1 confirm in 7 is "
            "dropped before processing and held 30 s, past the 2 s timeout; the reconciler finds "
            "it `IN_PROGRESS` → failed. Expected 1/7 = 14.29 %%; ours is one binomial sample of "
            "%ld (σ ≈ %.2f pp)%s. |\n",
            row_pct(b1, sizeof b1, l0), n, 100 * sqrt(p * (1 - p) / (double)n),
            l0->res.failed_cap > 0 ? ", plus a few cap rejections from a client or server stall"
                                   : "");
    fprintf(f,
            "| lossy, resend once | 1.90 %% | %s | The resend is an independent draw (fakegate "
            "seeds each decision by key *and* attempt), so a payment fails only if both are "
            "lost: p² = 2.04 %%. Both figures are samples of p² (σ ≈ %.2f pp at %ld). |\n",
            row_pct(b2, sizeof b2, l1), 100 * sqrt(p * p * (1 - p * p) / (double)n), n);
    fprintf(f,
            "| lossy, budget (≥ 4 free) | 2.82 %% | %s | With no latency only lost calls hold "
            "slots: 30/s × 1/7 × 2 s ≈ 8.6 of 40 busy, so the budget never binds (skipped: %ld) "
            "and ours repeats `resend-once` draw for draw. The published 2.82 %% vs 1.90 %% came "
            "from two separate random samples (their difference is ~2σ). |\n",
            row_pct(b3, sizeof b3, l2), l2->res.resends_skipped);
    fprintf(f,
            "| slow, no resend | 31.56 %% | %s | All failures are cap rejections (%ld of %ld): "
            "confirms queue 1.5–3 s, so 30/s × 2 s = 60 calls would be in flight but the cap is "
            "40. A call holds its slot min(2 s, queue + 20–80 ms) ≈ 1.93 s, so 40 slots carry "
            "≈ 20.7 calls/s and ≈ 31 %% are refused. Only ≈ 30 %% are answered within 2 s; every "
            "timed-out call (%ld UNKNOWN) was processed and reconciled `DONE`. |\n",
            row_pct(b4, sizeof b4, s0), s0->res.failed_cap, s0->res.failed, s0->res.unknown);
    fprintf(f,
            "| slow, resend once | 55.23 %% | %s | ≈ 70 %% of admitted first attempts time out "
            "and come back 20–60 ms later for another slot for up to 2 s (a resend waits its own "
            "turn in `queue_latency`, docs/profiles.md §4), taking the slots of later payments, which are "
            "refused at the cap (%ld). Ours is %.1f pp %s: %ld resends found the cap full and, "
            "like any call that finds no slot, were not sent (UNKNOWN, all reconciled `DONE`), "
            "so resends took fewer slots than if each had got one; the published figure fits "
            "resends that always got through (see the slow gateway-calls row). |\n",
            row_pct(b5, sizeof b5, s1), s1->res.failed_cap, fabs(pct(s1) - 55.23),
            pct(s1) < 55.23 ? "lower" : "higher", s1->res.resends_no_slot);
    fprintf(f,
            "| slow, budget (≥ 4 free) | 31.40 %% | %s | A saturated cap rarely has 4 free "
            "slots: a freed slot is taken by the next arrival within 1/30 s, so nearly every "
            "resend is skipped and the run behaves like `no-resend`. |\n",
            row_pct(b6, sizeof b6, s2));
    fprintf(f,
            "| resends skipped by the budget, slow | 1,176 | %ld | A skip needs a timed-out "
            "admitted first attempt: ours had %ld admitted, of which ≈ 70 %% time out "
            "(P(queue + latency > 2 s) = 0.70 for U(1.5–3 s) + U(20–80 ms)), bounding skips near "
            "%.0f. The published 1,176 implies ≈ 95 %% of their admitted confirms timed out: "
            "their saturated PG answered within 2 s far less often than `slow`'s queue. |\n",
            s2->res.resends_skipped, s2->res.attempts_sent - s2->res.resends_sent,
            0.70 * (double)(s2->res.attempts_sent - s2->res.resends_sent));
    fprintf(f,
            "| resends skipped by the budget, lossy | 0 | %ld | See the lossy budget row: "
            "never fewer than 4 free slots. |\n",
            l2->res.resends_skipped);
    fprintf(f,
            "| gateway calls with resend, lossy | +14.4 %% | %+.1f %% | Every lost first attempt "
            "is resent once: +1/7 = +14.3 %% of admitted calls. |\n",
            ratio_pct(l1->gateway_arrivals, l0->gateway_arrivals));
    fprintf(f,
            "| gateway calls with resend, slow | +12.8 %% | %+.1f %% | With the cap saturated, "
            "calls ≈ 40 slots × run length / mean hold time (≈ 1.93 s) whatever the policy: a "
            "resend holds its slot as long as a first attempt (it queues again), so each resend "
            "replaces a refused first attempt and the total barely moves. The published +12.8 %% "
            "means their resends held slots for less time than first attempts (e.g. answered "
            "early with 409 or a replay) or bypassed the cap; `slow`'s queue-before-claim "
            "gives a resend no shortcut. |\n",
            ratio_pct(s1->gateway_arrivals, s0->gateway_arrivals));
    fprintf(f,
            "| confirm p95, slow (first measurement) | 2.02 s → 4.07 s | %.2f s → %.2f s | "
            "Timeout 2 s, then 20–60 ms, then another 2 s. |\n\n",
            s0->res.p95_ms / 1000, s1->res.p95_ms / 1000);
    md_figure(f, "E1: failure rate by policy and condition", "e1.svg");
    md_rows(f, t, "E1");
}

static void md_e2(FILE *f, const ex_table *t, const ex_options *o, double wall)
{
    const ex_row *a = ex_find(t, "E2", "dawn-peak", "fixed-1s-x4");
    const ex_row *b = ex_find(t, "E2", "dawn-peak", "exp-jitter-x3");
    fprintf(f, "## E2 — fixed-interval retries vs exponential backoff with jitter against "
               "periodic throttling\n\n");
    if (!a || !b) {
        fprintf(f, "Not run in this invocation.\n\n");
        return;
    }
    fprintf(f,
            "Setup: %.0f confirms/s for %.0f s (%ld payments per run), timeout 10 s, no cap. "
            "Client A (`fixed-1s-x4`): a fixed 1 s interval, up to 4 attempts. Client B "
            "(`exp-jitter-x3`): exponential backoff, base 0.5 s, cap 4 s, each delay multiplied by "
            "U(0.5, 1.0) (\"equal\" jitter: 250–500 ms, then 500–1000 ms), up to 3 attempts. "
            "The gateway sends no Retry-After, so neither client has one to honour (as in the "
            "field report). Figure: the share of payments that got a 5xx and still ended in "
            "success through a retry (`retry_success_rate` in results.json).\n\n",
            a->rate_per_s, a->duration_s, a->res.requests);
    fprintf(f,
            "Profile: `dawn-peak` = %s: the field report's setup as shipped — confirms refused "
            "with 503 and no Retry-After for the first 0.6 s of every 1 s period (60 %%), healthy "
            "for the other 0.4 s; the window's phase starts with each run. Seed %llu, time scale "
            "%g. Took %.0f s.\n\n",
            a->profile, (unsigned long long)o->seed, o->scale, wall);
    fprintf(f, "| figure | published | ours | why they differ (or agree) |\n|---|---:|---:|---|\n");
    fprintf(f,
            "| 5xx'd requests saved by a retry, fixed 1 s × 4 | 18 %% | %.1f %% | Aliasing: the "
            "interval equals the period, so a payment first refused at phase p retries at "
            "p + 1, p + 2, p + 3 s ≡ p (mod 1 s) — back inside the 0.6 s window every time, so "
            "%ld of its %ld 5xx'd payments spent all 4 attempts and failed (%ld calls for %ld "
            "payments). "
            "fakegate's window is exact and a refused confirm is answered at once, so nothing "
            "shifts the phase; the published 18 %% is what a real gateway's drifting period and "
            "variable response time let escape. |\n",
            100 * a->retry_success_rate, a->res.got_5xx - a->res.saved_5xx, a->res.got_5xx,
            a->res.attempts_sent, a->res.requests);
    fprintf(f,
            "| 5xx'd requests saved by a retry, exponential + jitter × 3 | 41 %% | %.1f %% | "
            "Jittered delays land at phases unrelated to the first refusal: the first retry, "
            "p + 0.25–0.5 s, reaches the open 0.4 s for ≈ 57 %% of refused payments (those "
            "refused late in the window), the second, 0.5–1 s later, saves ≈ 14 %% of the rest: "
            "≈ 63 %% expected for a clean window (%ld of %ld here). The published 41 %% fits a "
            "gateway whose throttling was longer or less regular than an exact 60 %% window. |\n",
            100 * b->retry_success_rate, b->res.saved_5xx, b->res.got_5xx);
    fprintf(f,
            "| direction | jitter ≫ fixed | %.1f pp more | Agrees, and more sharply than "
            "published: the exact window leaves fixed 1 s retries no escape at all, while B "
            "also sends fewer calls (%ld vs %ld). |\n\n",
            100 * (b->retry_success_rate - a->retry_success_rate), b->res.attempts_sent,
            a->res.attempts_sent);
    md_figure(f, "E2: share of throttled payments a retry saved", "e2.svg");
    md_rows(f, t, "E2");
}

static void md_e3(FILE *f, const ex_table *t, const ex_options *o, double wall)
{
    const ex_row *a = ex_find(t, "E3", "outage", "immediate-x5");
    const ex_row *b = ex_find(t, "E3", "outage", "backoff-1-2-4+breaker");
    fprintf(f, "## E3 — a retry storm during an outage\n\n");
    if (!a || !b) {
        fprintf(f, "Not run in this invocation.\n\n");
        return;
    }
    /* the phases as recorded (a section rendered again from results.json has no options) */
    double bs = a->phase_start_s[1], os = a->phase_start_s[2] - a->phase_start_s[1];
    double as = a->duration_s - a->phase_start_s[2];
    fprintf(f,
            "Setup: %.0f confirms/s for %.0f s: `normal` for %.0f s, then `outage` for %.0f s, "
            "then `normal` for %.0f s (profile switched with `PUT /__admin/profile` during the "
            "run); timeout 10 s. Client A (`immediate-x5`): retries anything at once, up to 5 "
            "times (6 attempts). Client B (`backoff-1-2-4+breaker`): retries only timeouts, "
            "connection errors (the outage's resets are the no-answer case) and 503, after 1, 2, "
            "4 s, at most 3 times, behind a breaker that opens after 10 failures within 30 s, "
            "stays open 60 s, then lets one probe through. Profiles: %s. Seed %llu, time scale "
            "%g. Took %.0f s.\n\n",
            a->rate_per_s, a->duration_s, bs, os, as, a->profile, (unsigned long long)o->seed,
            o->scale, wall);
    fprintf(f, "| gateway arrivals per logical request (requests by arrival time) | published | "
               "A: immediate × 5 | B: backoff + breaker |\n|---|---:|---:|---:|\n");
    static const char *const label[] = {"before the outage", "during the outage",
                                        "after the outage"};
    for (size_t k = 0; k < 3 && k < a->n_phases; k++)
        fprintf(f, "| %s | %s | %.2f | %.2f |\n", label[k],
                k == 1 ? "“3× or more” (≈ 5 min)" : "—", ex_phase_attempts_per_request(a, k),
                ex_phase_attempts_per_request(b, k));
    fprintf(f, "| whole run (fakegate's count / requests) | — | %.2f | %.2f |\n",
            a->res.requests ? (double)a->gateway_arrivals / (double)a->res.requests : 0,
            b->res.requests ? (double)b->gateway_arrivals / (double)b->res.requests : 0);
    fprintf(f, "| fakegate's count by wall-clock phase (before / during / after) | — | %ld / %ld / %ld | %ld / %ld / %ld |\n",
            a->phase_gateway_arrivals[0], a->phase_gateway_arrivals[1],
            a->phase_gateway_arrivals[2], b->phase_gateway_arrivals[0],
            b->phase_gateway_arrivals[1], b->phase_gateway_arrivals[2]);
    for (size_t k = 0; k < 3 && k < a->n_phases; k++)
        fprintf(f, "| failed, %s | — | %ld of %ld | %ld of %ld |\n", label[k],
                a->res.phases[k].failed, a->res.phases[k].requests, b->res.phases[k].failed,
                b->res.phases[k].requests);
    fprintf(f, "\n");
    fprintf(f,
            "- **A, %.2f arrivals per request during the outage** (published: traffic tripled). "
            "`outage` fails every request at once (503 or a reset), so every payment spends all "
            "6 attempts: exactly 6×. The published “3× or more over about 5 minutes” averages "
            "a partial outage, where some attempts succeed and end the loop early, with normal "
            "traffic; over our whole run A sent %.2f× the requests.\n",
            ex_phase_attempts_per_request(a, 1),
            a->res.requests ? (double)a->gateway_arrivals / (double)a->res.requests : 0);
    fprintf(f,
            "- **B, %.2f per request during the outage**: the breaker opens after its first 10 "
            "failures (1 s of traffic at 10/s); the 1/2/4 s retries of those 10 and every later "
            "payment are refused locally (%ld refusals for the outage's %ld payments) — no storm, "
            "and the gateway gets room to recover.\n",
            ex_phase_attempts_per_request(b, 1), b->res.phases[1].breaker_rejected,
            b->res.phases[1].requests);
    fprintf(f,
            "- **The breaker's price**: it stays open 60 s, %s this %.0f s outage, so "
            "B refused %ld payments after the gateway had recovered (A: %ld). It opened %ld "
            "time(s); the half-open probe that found the gateway healthy closed it. A shorter "
            "open time trades a little load during an outage for those payments.\n\n",
            os < 60 ? "longer than" : "about as long as", os, b->res.phases[2].failed,
            a->res.phases[2].failed, b->res.breaker_opens);
    md_figure(f, "E3: gateway arrivals per second through the outage", "e3.svg");
    md_rows(f, t, "E3");
}

static void md_e4_rows(FILE *f, const ex_table *t)
{
    fprintf(f, "| condition | consumer | payments (partial / full cancels) | events filed | "
               "duplicated / dropped | received (repeated ids) | DONE after cancel | "
               "wrong status (stale) | side effect twice / never | missed | polled | "
               "read-backs | duplicates ignored |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < t->n; i++) {
        const ex_row *r = &t->rows[i];
        const ex_wh_result *w = &r->wh;
        if (strcmp(r->experiment, "E4") != 0)
            continue;
        fprintf(f,
                "| %s | %s | %ld (%ld / %ld) | %ld | %ld / %ld | %ld (%ld) | %ld | %ld (%ld) | "
                "%ld / %ld | %ld | %ld | %ld | %ld |\n",
                r->condition, r->policy, w->payments, w->partial_cancels, w->full_cancels,
                w->events, w->duplicates_filed, w->dropped, w->received, w->duplicates_received,
                w->reordered, w->wrong_status, w->stale, w->side_effect_twice,
                w->side_effect_never, w->missed, w->polled, w->read_backs,
                w->duplicates_ignored);
    }
    fprintf(f, "\n");
}

static void md_e4(FILE *f, const ex_table *t, const ex_options *o, double wall)
{
    const ex_row *nf = ex_find(t, "E4", "webhook-faults", "naive");
    const ex_row *rf = ex_find(t, "E4", "webhook-faults", "reference");
    const ex_row *nc = ex_find(t, "E4", "no-faults", "naive");
    const ex_row *rc = ex_find(t, "E4", "no-faults", "reference");
    fprintf(f, "## E4 — webhooks: naive vs reference receiver under duplicate and delay\n\n");
    if (!nf || !rf || !nc || !rc) {
        fprintf(f, "Not run in this invocation.\n\n");
        return;
    }
    const ex_wh_result *w = &nf->wh;
    fprintf(f,
            "Not a published experiment: ours, for the field report's lesson that a result "
            "arrives later, under the gateway's identifiers, and not necessarily once or in "
            "order (docs/webhooks.md §6.1, §6.3).\n\n");
    fprintf(f,
            "Setup: per run %ld payments of 15 000 KRW, confirmed one after another; every "
            "third is kept, every third partly canceled (5 000) and every third fully canceled, "
            "each cancel 40–150 ms (model) after its confirm — inside the webhook delay window, "
            "so a payment's `DONE` and its cancel's event can arrive in either order. One "
            "receiver (client-tests/receiver.c, answering 200 to everything) is fakegate's "
            "`--webhook-url`. Run `webhook-faults`: %s. Run `no-faults` (the control): %s, the "
            "same payments and gaps. After the payments the runner polls `GET "
            "/__admin/webhooks/deliveries` until every event is filed and none is pending, then "
            "feeds what the receiver got, in arrival order, to both consumers, and judges each "
            "table against the ledger (`GET /__admin/payments`). fakegate `--seed %llu` (drop, "
            "duplicate and delay are drawn per paymentKey and event), time scale %g. Took %.0f "
            "s.\n\n",
            w->payments, nf->profile, nc->profile, (unsigned long long)o->seed, o->scale, wall);
    fprintf(f,
            "What arrived in `webhook-faults`: %ld events filed (one per transition: %ld `DONE`, "
            "%ld `PARTIAL_CANCELED`, %ld `CANCELED`), %ld dropped, %ld duplicated; the receiver "
            "got %ld deliveries, %ld of them with a transmission id it already had; %ld payments "
            "had a `DONE` arrive after their cancel's event.\n\n",
            w->events, w->payments, w->partial_cancels, w->full_cancels, w->dropped,
            w->duplicates_filed, w->received, w->duplicates_received, w->reordered);
    fprintf(f,
            "- **naive**: keyed on orderId; the status is the body's `data.status` of the last "
            "delivery to arrive; every `DONE` delivery runs the approval's side effect (ship the "
            "order, credit the points).\n"
            "- **reference** (`client-tests/reconcile.c`, as client-tests/README.md recommends): "
            "a transmission id already handled is acknowledged and ignored; keyed on paymentKey; "
            "on a new event it reads the payment back (`GET /v1/payments/{paymentKey}`) and "
            "stores what the read says; the side effect runs once per paymentKey, when a read "
            "first shows the payment approved (`DONE`, `PARTIAL_CANCELED`, or `CANCELED` with an "
            "`approvedAt`); at the end it polls every payment of its order list that no webhook "
            "named.\n\n");
    fprintf(f, "| figure (of %ld payments) | naive | reference | naive, no faults | reference, "
               "no faults | why |\n|---|---:|---:|---:|---:|---|\n",
            w->payments);
    fprintf(f,
            "| wrong final status (table ≠ ledger) | %ld | %ld | %ld | %ld | Every naive error "
            "is a canceled payment still `DONE`: %ld because a `DONE` arrived after the cancel "
            "(next row), the other %ld because their cancel's event was dropped, so the last "
            "word they heard was `DONE`. The reference never takes a status from a body; "
            "its reads here come after the run settled, so each is the payment's final state "
            "(see the note below). |\n",
            nf->wh.wrong_status, rf->wh.wrong_status, nc->wh.wrong_status, rc->wh.wrong_status,
            nf->wh.stale, nf->wh.wrong_status - nf->wh.stale);
    fprintf(f,
            "| … stale after reordering (a `DONE` that arrived after the cancel) | %ld | %ld | "
            "%ld | %ld | %ld payments had a `DONE` arrive after their cancel: the `DONE`'s delay "
            "(0–%g ms) exceeded the 40–150 ms gap plus the cancel event's own delay, or a "
            "duplicate `DONE` came up to %g ms later still. Without faults every event leaves at "
            "once, in the order the payments changed. |\n",
            nf->wh.stale, rf->wh.stale, nc->wh.stale, rc->wh.stale, w->reordered, 400.0, 300.0);
    fprintf(f,
            "| side effect run twice | %ld | %ld | %ld | %ld | The naive consumer runs it per "
            "`DONE` *delivery*: every duplicated `DONE` ran it again. The reference ignored %ld "
            "deliveries by transmission id, and runs it once per paymentKey in any case. |\n",
            nf->wh.side_effect_twice, rf->wh.side_effect_twice, nc->wh.side_effect_twice,
            rc->wh.side_effect_twice, rf->wh.duplicates_ignored);
    fprintf(f,
            "| approved, side effect never run | %ld | %ld | %ld | %ld | Every payment here was "
            "approved. The naive consumer acts only on a `DONE` body, so a dropped `DONE` is a "
            "sale it never counts, even when the cancel's event arrives; the reference acts on "
            "what a read says, whichever event (or the reconciler) caused the read. |\n",
            nf->wh.side_effect_never, rf->wh.side_effect_never, nc->wh.side_effect_never,
            rc->wh.side_effect_never);
    fprintf(f,
            "| missed (never heard of, not polled) | %ld | %ld | %ld | %ld | Every event of "
            "those payments was dropped (a kept payment has only its `DONE`: 1 in 20). The "
            "reference's reconciler polled the %ld payments no webhook named. |\n",
            nf->wh.missed, rf->wh.missed, nc->wh.missed, rc->wh.missed, rf->wh.polled);
    fprintf(f,
            "| reads of the gateway | 0 | %ld | 0 | %ld | The reference's price: one read per "
            "new event plus one per payment no webhook named. |\n\n",
            rf->wh.read_backs, rc->wh.read_backs);
    fprintf(f,
            "- **Keys.** Here each orderId has exactly one payment (fakegate refuses a second "
            "paymentKey for an orderId: `DUPLICATED_ORDER_ID`), so keying on orderId costs the "
            "naive consumer nothing by itself: every error above comes from trusting the body "
            "and the arrival order. The reference keys on paymentKey because it names the "
            "payment for its whole life and every webhook's `data` carries it "
            "(docs/webhooks.md §6.1).\n"
            "- **When the reads happen.** Both consumers run after the deliveries settled, so "
            "the reference's read-backs see final states. A receiver that reads as events "
            "arrive is one step behind when a later event of the same payment is dropped (a "
            "`DONE` read before the cancel, whose event never comes): polling only the payments "
            "no webhook named does not catch that; a reconciler that also re-reads payments "
            "whose last read was not final, for as long as they can still change, does.\n\n");
    md_e4_rows(f, t);
}

/* The options a section was run with: the current ones, with the scale and seed its rows
 * recorded (a section kept from results.json ran with its own). */
static ex_options section_options(const ex_table *t, const ex_options *o, const char *experiment)
{
    ex_options eo = *o;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].experiment, experiment) == 0) {
            eo.scale = t->rows[i].scale;
            eo.seed = t->rows[i].seed;
            break;
        }
    return eo;
}

int rp_write_markdown(const char *path, const ex_table *t, const ex_options *o,
                      const rp_timing *timing)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    double total = 0;
    bool kept = false, uniform = true;
    char only[32] = "";
    ex_options eo[RP_EXPERIMENTS];
    for (int k = 0; k < RP_EXPERIMENTS; k++) {
        eo[k] = section_options(t, o, EXPERIMENTS[k]);
        if (!timing->ran[k])
            continue;
        total += timing->wall_s[k];
        kept = kept || timing->kept[k];
        uniform = uniform && eo[k].scale == o->scale && eo[k].seed == o->seed;
        if (!timing->kept[k])
            snprintf(only + strlen(only), sizeof only - strlen(only), "%s%s", only[0] ? "," : "",
                     EXPERIMENTS[k]);
    }
    char runs[160];
    if (uniform)
        snprintf(runs, sizeof runs, "time scale %g, seed %llu", o->scale,
                 (unsigned long long)o->seed);
    else
        snprintf(runs, sizeof runs, "each section says its time scale and seed");
    fprintf(f, "# Experiments against fakegate: published retry figures (E1–E3), webhook "
               "consumers (E4)\n\n");
    fprintf(f,
            "Generated by `make experiments SCALE=%g%s%s` (client-tests/experiments/, with the "
            "client library in client-tests/retry.c, loadgen.c, experiment.c, experiment_e4.c "
            "and reconcile.c); raw rows in `client-tests/results.json`. ",
            o->scale, kept && only[0] ? " ONLY=" : "", kept ? only : "");
    if (kept && only[0])
        fprintf(f,
                "That ran only %s; the other sections are rendered again from the rows "
                "results.json recorded for them. ",
                only);
    else if (kept)
        fprintf(f, "Every section is rendered again from the rows results.json recorded. ");
    fprintf(f,
            "%s: %s, %.0f s in all. The published figures are the field reports' (issue 6); E4 "
            "has none. Counts do not depend on the scale; latencies are reported in model time "
            "(real ÷ scale).\n\n",
            kept ? "These runs" : "This run", runs, total);
    fprintf(f,
            "**Time scale.** `--scale S` multiplies every duration: arrival gaps, timeouts, "
            "backoff, the breaker's window and open time, settle time, profile switch times, and "
            "the gateway's own latencies. At S = 1 each condition applies the shipped profile by "
            "name (`PUT /__admin/profile {\"name\": \"lossy\"}`: fakegate reads the very file "
            "users get). At S ≠ 1 the runner reads the shipped file and PUTs a copy in which "
            "every `ms`, `*_ms` and `*_s` value is multiplied by S (and `rate_per_s` divided): "
            "`dawn-peak`'s 1 s window becomes an S s window (it sends no Retry-After, so "
            "fakegate accepts any period); E4 scales its profile the same way, and the gap "
            "between a confirm and its cancel. Scale 1 takes about 15 minutes (E1 ≈ 405 s, "
            "E2 ≈ 125 s, E3 ≈ 305 s, E4 ≈ 40 s); `SCALE=0.1` about 1 min 30 s; `make "
            "test` runs E1–E3 at 0.25 with shorter runs and E4 at 0.5 (≈ 80 s in all). "
            "`ONLY=E4` (`--only E4`) runs just that one and keeps the other experiments' rows "
            "from results.json.\n\n");
    fprintf(f,
            "**Client (E1–E3).** One libcurl multi loop: open-loop arrivals evenly spaced; one "
            "orderId, paymentKey and Idempotency-Key per payment, reused by every resend; a new "
            "TCP connection per attempt (libcurl silently resends a request whose reused "
            "keep-alive connection is reset before answering, which would add gateway arrivals "
            "no policy decided). Gateway calls are counted twice: by the client (attempts sent) "
            "and by fakegate (`GET /metrics`: `fakegate_requests_total` + `fakegate_in_flight` "
            "for route `confirm`, minus what was still in flight from the previous run).\n\n");
    if (timing->ran[0])
        md_e1(f, t, &eo[0], timing->wall_s[0]);
    if (timing->ran[1])
        md_e2(f, t, &eo[1], timing->wall_s[1]);
    if (timing->ran[2])
        md_e3(f, t, &eo[2], timing->wall_s[2]);
    fprintf(f,
            "## Notes on the profiles\n\n"
            "- `dawn-peak` is the field report's literal setup: a `window` throttle of period "
            "1 s, throttled 0.6 s, with `\"retry_after\": {\"format\": \"none\"}`. Without "
            "that, fakegate would refuse the window: no whole-second Retry-After can leave a "
            "window whose period divides 1 s — exactly the windows a whole-second "
            "fixed-interval client aliases with.\n"
            "- `slow` queues resends like first attempts (`queue_latency` comes before the "
            "idempotency claim), which is why a resend costs a slot for as long as a first "
            "attempt (E1's slow gateway-call row).\n");
    if (timing->ran[3]) {
        fprintf(f, "\n");
        md_e4(f, t, &eo[3], timing->wall_s[3]);
    }
    return fclose(f) == 0 ? 0 : -1;
}
