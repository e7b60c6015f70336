/* experiment.c -- E1-E3 of issue 6 against a harness-started fakegate, and the rows all four
 * experiments share (see experiment.h; E4 is experiment_e4.c). */
#define _POSIX_C_SOURCE 200809L
#include "experiment.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

void ex_options_default(ex_options *o)
{
    memset(o, 0, sizeof *o);
    o->scale = 1.0;
    o->seed = 42;
    o->e1_duration_s = 60;
    o->e2_duration_s = 60;
    o->e3_before_s = 30;
    o->e3_outage_s = 30;
    o->e3_after_s = 90;
    o->e4_payments = 300;
}

static void set_err(char err[EX_ERR_LEN], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, EX_ERR_LEN, fmt, ap);
    va_end(ap);
}

/* ---- pure helpers ---------------------------------------------------------------------------- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static json_t *scale_rec(const json_t *v, double scale)
{
    if (json_is_object(v)) {
        json_t *o = json_object();
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x) {
            json_t *nx;
            if (json_is_number(x) && strcmp(k, "rate_per_s") == 0)
                nx = json_real(json_number_value(x) / scale);
            else if (json_is_number(x) &&
                     (strcmp(k, "ms") == 0 || ends_with(k, "_ms") || ends_with(k, "_s")))
                nx = json_real(json_number_value(x) * scale);
            else
                nx = scale_rec(x, scale);
            json_object_set_new(o, k, nx);
        }
        return o;
    }
    if (json_is_array(v)) {
        json_t *a = json_array();
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
            json_array_append_new(a, scale_rec(x, scale));
        return a;
    }
    return json_deep_copy(v);
}

json_t *ex_scale_profile(const json_t *p, double scale)
{
    return scale_rec(p, scale);
}

/* Sum of the samples of `family{...route="<route>"...}` lines. */
static long metric_sum(const char *text, const char *family, const char *route, bool *found)
{
    char want[96], prefix[96];
    snprintf(want, sizeof want, "route=\"%s\"", route);
    snprintf(prefix, sizeof prefix, "%s{", family);
    size_t plen = strlen(prefix);
    long sum = 0;
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (len > plen && strncmp(line, prefix, plen) == 0) {
            const char *close = memchr(line, '}', len);
            const char *hit = strstr(line, want);
            if (close && hit && hit < close) {
                sum += strtol(close + 1, NULL, 10);
                *found = true;
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return sum;
}

long ex_metrics_arrivals(const char *text, const char *route)
{
    if (!text)
        return -1;
    bool found = false;
    long n = metric_sum(text, "fakegate_requests_total", route, &found);
    n += metric_sum(text, "fakegate_in_flight", route, &found);
    return found ? n : -1;
}

/* ---- admin calls ----------------------------------------------------------------------------- */

static const char *profiles_dir(const ex_options *o)
{
    if (o->profiles_dir && o->profiles_dir[0])
        return o->profiles_dir;
    const char *e = getenv("FAKEGATE_PROFILES");
    return e && e[0] ? e : "profiles";
}

static fg_server *start_server(const ex_options *o, char err[EX_ERR_LEN])
{
    char seed[32], normal[FG_PATH_LEN], ferr[FG_ERR_LEN];
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)o->seed);
    snprintf(normal, sizeof normal, "%s/normal.json", profiles_dir(o));
    const char *args[] = {"--profile", normal, "--profiles-dir", profiles_dir(o), "--seed", seed,
                          NULL};
    fg_opts opts;
    memset(&opts, 0, sizeof opts);
    opts.args = args;
    fg_server *s = fg_start(&opts, ferr);
    if (!s)
        set_err(err, "fakegate did not start: %s", ferr);
    return s;
}

static int admin_call(const fg_server *s, const char *method, const char *path, const char *body,
                      fg_response *r)
{
    fg_request req;
    memset(&req, 0, sizeof req);
    req.method = method;
    req.path = path;
    req.body = body;
    req.timeout_ms = 10000;
    return fg_http(s, NULL, &req, r);
}

static int reset(const fg_server *s, char err[EX_ERR_LEN])
{
    fg_response r;
    int rc = admin_call(s, "POST", "/__admin/reset", "{}", &r);
    if (rc != 0 || r.status != 200) {
        set_err(err, "POST /__admin/reset: status %ld %s %s", r.status, r.curl_error, r.body);
        rc = -1;
    }
    fg_response_fini(&r);
    return rc;
}

static long confirm_arrivals(const fg_server *s)
{
    fg_response r;
    long n = -1;
    if (admin_call(s, "GET", "/metrics", NULL, &r) == 0 && r.status == 200)
        n = ex_metrics_arrivals(r.body, "confirm");
    fg_response_fini(&r);
    return n;
}

static int put_profile_text(const fg_server *s, const char *text, long *status, char *msg,
                            size_t msg_size)
{
    fg_response r;
    int rc = admin_call(s, "PUT", "/__admin/profile", text, &r);
    *status = r.status;
    snprintf(msg, msg_size, "%s%s", r.curl_error, r.body);
    fg_response_fini(&r);
    return rc == 0 && *status == 200 ? 0 : -1;
}

static json_t *load_profile(const ex_options *o, const char *name, char err[EX_ERR_LEN])
{
    char path[FG_PATH_LEN];
    snprintf(path, sizeof path, "%s/%s.json", profiles_dir(o), name);
    json_error_t je;
    json_t *p = json_load_file(path, 0, &je);
    if (!p)
        set_err(err, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    return p;
}

/* Apply shipped profile `name` at the options' scale. Writes how it was applied into desc. */
static int apply_profile(const fg_server *s, const ex_options *o, const char *name, char *desc,
                         size_t desc_size, char err[EX_ERR_LEN])
{
    long st;
    char msg[1024];
    if (o->scale == 1.0) {
        char body[128];
        snprintf(body, sizeof body, "{\"name\":\"%s\"}", name);
        if (put_profile_text(s, body, &st, msg, sizeof msg) != 0) {
            set_err(err, "PUT /__admin/profile %s: %ld %s", body, st, msg);
            return -1;
        }
        snprintf(desc, desc_size, "profiles/%s.json (PUT by name)", name);
        return 0;
    }
    json_t *base = load_profile(o, name, err);
    if (!base)
        return -1;
    json_t *scaled = ex_scale_profile(base, o->scale);
    json_decref(base);
    char *text = json_dumps(scaled, JSON_COMPACT);
    int rc = put_profile_text(s, text, &st, msg, sizeof msg);
    free(text);
    json_decref(scaled);
    if (rc != 0) {
        set_err(err, "PUT /__admin/profile (%s, scale %g): %ld %s", name, o->scale, st, msg);
        return -1;
    }
    snprintf(desc, desc_size, "profiles/%s.json (a copy with every duration ×%g, PUT as an object)",
             name, o->scale);
    return 0;
}

/* ---- rows ------------------------------------------------------------------------------------ */

static void fill_row(ex_row *row, const char *exp, const char *cond, const lg_config *cfg,
                     const ex_options *o)
{
    memset(row, 0, sizeof *row);
    snprintf(row->experiment, sizeof row->experiment, "%s", exp);
    snprintf(row->condition, sizeof row->condition, "%s", cond);
    snprintf(row->policy, sizeof row->policy, "%s", cfg->policy.name);
    row->scale = o->scale;
    row->seed = o->seed;
    row->rate_per_s = cfg->rate_per_s;
    row->duration_s = cfg->duration_s;
    row->timeout_ms = cfg->timeout_ms;
    row->retry_success_rate = -1;
}

void ex_print_header(FILE *f)
{
    fprintf(f, "%-3s %-13s %-22s %6s %7s %6s %6s %5s %5s %6s %6s %6s %7s %7s %8s %8s\n", "exp",
            "condition", "policy", "reqs", "attempts", "ok", "failed", "cap", "decl", "unk",
            "unkres", "resend", "skipped", "gateway", "p50_ms", "p95_ms");
}

void ex_print_webhook_header(FILE *f)
{
    fprintf(f, "%-3s %-14s %-9s %5s %6s %6s %5s %5s %6s %6s %6s %6s %6s %6s %6s %6s\n", "exp",
            "condition", "consumer", "pays", "events", "recvd", "dups", "drops", "reord", "wrong",
            "stale", "twice", "never", "missed", "polled", "reads");
}

static void print_webhook_row(FILE *f, const ex_row *r)
{
    const ex_wh_result *w = &r->wh;
    fprintf(f, "%-3s %-14s %-9s %5ld %6ld %6ld %5ld %5ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld %6ld\n",
            r->experiment, r->condition, r->policy, w->payments, w->events, w->received,
            w->duplicates_received, w->dropped, w->reordered, w->wrong_status, w->stale,
            w->side_effect_twice, w->side_effect_never, w->missed, w->polled, w->read_backs);
    fflush(f);
}

void ex_print_row(FILE *f, const ex_row *r)
{
    if (strcmp(r->experiment, "E4") == 0) {
        print_webhook_row(f, r);
        return;
    }
    const lg_result *x = &r->res;
    fprintf(f, "%-3s %-13s %-22s %6ld %7ld %6ld %6ld %5ld %5ld %6ld %6ld %6ld %7ld %7ld %8.0f %8.0f\n",
            r->experiment, r->condition, r->policy, x->requests, x->attempts_sent, x->successes,
            x->failed, x->failed_cap, x->failed_declined, x->unknown, x->unknown_resolved,
            x->resends_sent, x->resends_skipped, r->gateway_arrivals, x->p50_ms, x->p95_ms);
    fflush(f);
}

const ex_row *ex_find(const ex_table *t, const char *experiment, const char *condition,
                      const char *policy)
{
    for (size_t i = 0; i < t->n; i++) {
        const ex_row *r = &t->rows[i];
        if (strcmp(r->experiment, experiment) == 0 && strcmp(r->condition, condition) == 0 &&
            strcmp(r->policy, policy) == 0)
            return r;
    }
    return NULL;
}

double ex_phase_attempts_per_request(const ex_row *r, size_t phase)
{
    const lg_phase *p = &r->res.phases[phase];
    return p->requests > 0 ? (double)p->attempts_sent / (double)p->requests : 0;
}

static void base_config(lg_config *c, const fg_server *s, const ex_options *o, char *url,
                        size_t url_size)
{
    memset(c, 0, sizeof *c);
    snprintf(url, url_size, "http://127.0.0.1:%d", s->port);
    c->base_url = url;
    c->auth_header = s->auth_header;
    c->time_scale = o->scale;
    c->seed = o->seed;
    c->reconcile = true;
    c->settle_s = 4.0;
    c->verbose = o->verbose;
}

/* One run: reset, apply, load, count arrivals. The profile is applied before the reset so that
 * a window's phase starts with the run. */
static int one_run(const fg_server *s, const ex_options *o, const char *profile,
                   const lg_config *cfg, ex_row *row,
                   long *baseline_out, char err[EX_ERR_LEN])
{
    if (apply_profile(s, o, profile, row->profile, sizeof row->profile, err) != 0 ||
        reset(s, err) != 0)
        return -1;
    /* Requests of the previous run still held (lossy: 30 s) are in flight across the reset;
     * they are counted here and subtracted. */
    long baseline = confirm_arrivals(s);
    if (baseline < 0)
        baseline = 0;
    if (baseline_out)
        *baseline_out = baseline;
    char lerr[LG_ERR_LEN];
    if (lg_run(cfg, &row->res, lerr) != 0) {
        set_err(err, "%s %s %s: %s", row->experiment, row->condition, row->policy, lerr);
        return -1;
    }
    row->gateway_arrivals = confirm_arrivals(s) - baseline;
    if (row->res.got_5xx > 0)
        row->retry_success_rate = (double)row->res.saved_5xx / (double)row->res.got_5xx;
    if (o->verbose)
        ex_print_row(stdout, row);
    return 0;
}

/* ---- E1 -------------------------------------------------------------------------------------- */

int ex_run_e1(const ex_options *o, ex_table *t, char err[EX_ERR_LEN])
{
    int64_t t0 = lg_now_ns();
    fg_server *s = start_server(o, err);
    if (!s)
        return -1;
    static const char *const conds[] = {"lossy", "slow"};
    lg_policy pols[3];
    memset(pols, 0, sizeof pols);
    for (int i = 0; i < 3; i++) {
        pols[i].cap = 40;
        pols[i].retry_on = RC_C_TIMEOUT | RC_C_CONN;
        pols[i].backoff = (rc_backoff){.kind = RC_BACKOFF_FIXED, .base_ms = 40,
                                       .jitter = RC_JITTER_RANGE, .lo = 0.5, .hi = 1.5};
    }
    pols[0].name = "no-resend";
    pols[0].max_attempts = 1;
    pols[1].name = "resend-once";
    pols[1].max_attempts = 2;
    pols[2].name = "resend-if-4-free";
    pols[2].max_attempts = 2;
    pols[2].resend_min_free = 4;
    int rc = 0;
    char url[64];
    for (size_t c = 0; c < 2 && rc == 0; c++) {
        for (size_t p = 0; p < 3 && rc == 0; p++) {
            if (t->n >= EX_MAX_ROWS) {
                set_err(err, "too many rows");
                rc = -1;
                break;
            }
            lg_config cfg;
            base_config(&cfg, s, o, url, sizeof url);
            char prefix[32];
            snprintf(prefix, sizeof prefix, "e1-%s", conds[c]);
            cfg.id_prefix = prefix; /* same ids for every policy: same draws (common seeds) */
            cfg.rate_per_s = 30;
            cfg.duration_s = o->e1_duration_s;
            cfg.timeout_ms = 2000;
            cfg.policy = pols[p];
            ex_row *row = &t->rows[t->n];
            fill_row(row, "E1", conds[c], &cfg, o);
            rc = one_run(s, o, conds[c], &cfg, row, NULL, err);
            if (rc == 0)
                t->n++;
        }
    }
    fg_free(s);
    t->wall_s += (double)(lg_now_ns() - t0) / 1e9;
    return rc;
}

/* ---- E2 -------------------------------------------------------------------------------------- */

int ex_run_e2(const ex_options *o, ex_table *t, char err[EX_ERR_LEN])
{
    int64_t t0 = lg_now_ns();
    /* The shipped dawn-peak is the field report's setup: 503 for the first 0.6 s of every 1 s,
     * no Retry-After. */
    fg_server *s = start_server(o, err);
    if (!s)
        return -1;
    lg_policy fixed1, jitter;
    memset(&fixed1, 0, sizeof fixed1);
    fixed1.name = "fixed-1s-x4";
    fixed1.max_attempts = 4;
    fixed1.backoff = (rc_backoff){.kind = RC_BACKOFF_FIXED, .base_ms = 1000};
    jitter = fixed1;
    jitter.name = "exp-jitter-x3";
    jitter.max_attempts = 3;
    jitter.backoff = (rc_backoff){.kind = RC_BACKOFF_EXPONENTIAL, .base_ms = 500, .cap_ms = 4000,
                                  .multiplier = 2, .jitter = RC_JITTER_EQUAL};
    const lg_policy *runs[] = {&fixed1, &jitter};
    int rc = 0;
    char url[64];
    for (size_t i = 0; i < sizeof runs / sizeof runs[0] && rc == 0; i++) {
        if (t->n >= EX_MAX_ROWS) {
            set_err(err, "too many rows");
            rc = -1;
            break;
        }
        lg_config cfg;
        base_config(&cfg, s, o, url, sizeof url);
        cfg.id_prefix = "e2";
        cfg.rate_per_s = 20;
        cfg.duration_s = o->e2_duration_s;
        cfg.timeout_ms = 10000;
        cfg.policy = *runs[i];
        ex_row *row = &t->rows[t->n];
        fill_row(row, "E2", "dawn-peak", &cfg, o);
        rc = one_run(s, o, "dawn-peak", &cfg, row, NULL, err);
        if (rc == 0)
            t->n++;
    }
    fg_free(s);
    t->wall_s += (double)(lg_now_ns() - t0) / 1e9;
    return rc;
}

/* ---- E3 -------------------------------------------------------------------------------------- */

typedef struct e3_ctx {
    const fg_server *s;
    const ex_options *o;
    long snap[4];       /* confirm arrivals (GET /metrics): at the start, each switch, the end */
    int switches;       /* profile switches done */
    long second[EX_MAX_SECONDS + 1]; /* ... at the start ([0]) and at each whole model second */
    size_t seconds;     /* whole seconds read so far */
    int failed;
    char err[EX_ERR_LEN];
} e3_ctx;

/* The first switch is to `outage`, the second back to `normal`. */
static void e3_switch(void *ctx, int index)
{
    (void)index;
    e3_ctx *c = ctx;
    c->snap[++c->switches] = confirm_arrivals(c->s);
    char desc[256];
    if (c->switches == 1) {
        long st;
        char msg[512];
        if (put_profile_text(c->s, "{\"name\":\"outage\"}", &st, msg, sizeof msg) != 0) {
            c->failed = 1;
            set_err(c->err, "PUT outage: %ld %s", st, msg);
        }
    } else if (apply_profile(c->s, c->o, "normal", desc, sizeof desc, c->err) != 0) {
        c->failed = 1;
    }
}

static void e3_second(void *ctx, int index)
{
    (void)index;
    e3_ctx *c = ctx;
    long n = confirm_arrivals(c->s);
    if (n < 0 || c->seconds >= EX_MAX_SECONDS) {
        c->failed = 1;
        set_err(c->err, "GET /metrics at second %zu gave no confirm count", c->seconds + 1);
        return;
    }
    c->second[++c->seconds] = n;
}

/* The run's events in time order: a read of /metrics at each whole second 1 ... n_seconds - 1
 * and the two switches (at b and b + d model s; a read at the same second goes first). Returns
 * how many; `ev` has room for EX_MAX_SECONDS + 2. */
static size_t e3_events(lg_event *ev, e3_ctx *ctx, double b, double d, size_t n_seconds)
{
    const double at[2] = {b, b + d};
    size_t n = 0, k = 0;
    for (size_t sec = 1; sec < n_seconds; sec++) {
        for (; k < 2 && at[k] < (double)sec; k++)
            ev[n++] = (lg_event){at[k], e3_switch, ctx};
        ev[n++] = (lg_event){(double)sec, e3_second, ctx};
    }
    for (; k < 2; k++)
        ev[n++] = (lg_event){at[k], e3_switch, ctx};
    return n;
}

int ex_run_e3(const ex_options *o, ex_table *t, char err[EX_ERR_LEN])
{
    int64_t t0 = lg_now_ns();
    fg_server *s = start_server(o, err);
    if (!s)
        return -1;
    lg_policy imm, brk;
    memset(&imm, 0, sizeof imm);
    imm.name = "immediate-x5";
    imm.max_attempts = 6;
    imm.backoff.kind = RC_BACKOFF_NONE;
    memset(&brk, 0, sizeof brk);
    brk.name = "backoff-1-2-4+breaker";
    brk.max_attempts = 4;
    brk.retry_on = RC_C_TIMEOUT | RC_C_CONN | RC_C_UNAVAILABLE;
    brk.backoff = (rc_backoff){.kind = RC_BACKOFF_EXPONENTIAL, .base_ms = 1000, .cap_ms = 4000,
                               .multiplier = 2};
    brk.breaker = true;
    brk.breaker_failures = 10;
    brk.breaker_window_ms = 30000;
    brk.breaker_open_ms = 60000;
    const lg_policy *pols[] = {&imm, &brk};
    double b = o->e3_before_s, d = o->e3_outage_s, a = o->e3_after_s;
    int rc = 0;
    char url[64];
    for (size_t p = 0; p < 2 && rc == 0; p++) {
        if (t->n >= EX_MAX_ROWS) {
            set_err(err, "too many rows");
            rc = -1;
            break;
        }
        e3_ctx ctx;
        memset(&ctx, 0, sizeof ctx);
        ctx.s = s;
        ctx.o = o;
        double total = ceil(b + d + a);
        size_t n_seconds = total <= EX_MAX_SECONDS ? (size_t)total : 0;
        lg_event ev[EX_MAX_SECONDS + 2];
        size_t n_ev = e3_events(ev, &ctx, b, d, n_seconds);
        lg_config cfg;
        base_config(&cfg, s, o, url, sizeof url);
        cfg.id_prefix = "e3";
        cfg.rate_per_s = 10;
        cfg.duration_s = b + d + a;
        cfg.timeout_ms = 10000;
        cfg.settle_s = 2;
        cfg.policy = *pols[p];
        cfg.phase_starts[0] = 0;
        cfg.phase_starts[1] = b;
        cfg.phase_starts[2] = b + d;
        cfg.n_phases = 3;
        cfg.events = ev;
        cfg.n_events = n_ev;
        ex_row *row = &t->rows[t->n];
        fill_row(row, "E3", "outage", &cfg, o);
        rc = one_run(s, o, "normal", &cfg, row, &ctx.snap[0], err);
        if (rc == 0 && ctx.failed) {
            set_err(err, "%s", ctx.err);
            rc = -1;
        }
        if (rc != 0)
            break;
        size_t n = strlen(row->profile);
        snprintf(row->profile + n, sizeof row->profile - n,
                 "; profiles/outage.json PUT by name at %g s, normal again at %g s", b, b + d);
        row->n_phases = 3;
        snprintf(row->phase_names[0], sizeof row->phase_names[0], "before");
        snprintf(row->phase_names[1], sizeof row->phase_names[1], "outage");
        snprintf(row->phase_names[2], sizeof row->phase_names[2], "after");
        ctx.snap[3] = row->gateway_arrivals + ctx.snap[0];
        for (size_t k = 0; k < 3; k++) {
            row->phase_start_s[k] = cfg.phase_starts[k];
            row->phase_gateway_arrivals[k] = ctx.snap[k + 1] - ctx.snap[k];
        }
        if (n_seconds > 0 && ctx.seconds != n_seconds - 1) {
            set_err(err, "E3 %s: %zu of %zu per-second reads", row->policy, ctx.seconds,
                    n_seconds - 1);
            rc = -1;
            break;
        }
        if (n_seconds > 0) {
            /* lg_run fires the reads planned after its last call at its end: none is missing */
            ctx.second[0] = ctx.snap[0];
            ctx.second[n_seconds] = ctx.snap[3];
            row->n_seconds = n_seconds;
            for (size_t k = 0; k < n_seconds; k++)
                row->arrivals_per_s[k] = ctx.second[k + 1] - ctx.second[k];
        }
        t->n++;
    }
    fg_free(s);
    t->wall_s += (double)(lg_now_ns() - t0) / 1e9;
    return rc;
}
