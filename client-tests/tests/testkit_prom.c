/* testkit_prom.c -- the testkit's strict parser of Prometheus text (exposition format 0.0.4) and
 * the /metrics helpers built on it, for the control-plane suites (check_admin_*.c). Declared in
 * testkit.h. */
#define _GNU_SOURCE

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkit.h"

/* ---- Prometheus text: a small strict parser ----------------------------------------------- */

static bool prom_name_ok(const char *p, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)p[0]) || p[0] == '_' || p[0] == ':'))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)p[i]) || p[i] == '_' || p[i] == ':'))
            return false;
    return true;
}

struct prom_family *prom_family_get(struct prom *p, const char *name)
{
    for (size_t i = 0; i < p->nf; i++)
        if (strcmp(p->f[i].name, name) == 0)
            return &p->f[i];
    return NULL;
}

/* The family a sample named `name` belongs to (histograms: _bucket, _sum, _count). */
static struct prom_family *prom_family_of(struct prom *p, const char *name)
{
    struct prom_family *f = prom_family_get(p, name);
    if (f != NULL)
        return f;
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
    for (size_t k = 0; k < 3; k++) {
        size_t nl = strlen(name), sl = strlen(suffixes[k]);
        if (nl > sl && strcmp(name + nl - sl, suffixes[k]) == 0) {
            char base[96];
            snprintf(base, sizeof base, "%.*s", (int)(nl - sl), name);
            f = prom_family_get(p, base);
            if (f != NULL && strcmp(f->type, "histogram") == 0)
                return f;
        }
    }
    return NULL;
}

static void prom_enter(struct prom *p, struct prom_family *cur)
{
    for (size_t i = 0; i < p->nf; i++)
        if (&p->f[i] != cur && !p->f[i].closed && (p->f[i].n_help || p->f[i].n_type))
            p->f[i].closed = true;
}

/* Parse `text`; false with a message in err. */
bool prom_parse(const char *text, struct prom *p, char *err, size_t errlen)
{
    memset(p, 0, sizeof *p);
    size_t len = strlen(text), cap = 256;
    p->s = calloc(cap, sizeof *p->s);
    ck_assert(p->s != NULL);
    if (len == 0 || text[len - 1] != '\n') {
        snprintf(err, errlen, "no final newline");
        return false;
    }
    int lineno = 0;
    for (const char *line = text; *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t n = (size_t)(eol - line);
        lineno++;
        char buf[512];
        if (n >= sizeof buf) {
            snprintf(err, errlen, "line %d too long", lineno);
            return false;
        }
        memcpy(buf, line, n);
        buf[n] = '\0';
        line = eol + 1;
        if (n == 0) {
            snprintf(err, errlen, "line %d is empty", lineno);
            return false;
        }
        if (buf[0] == '#') {
            bool help = strncmp(buf, "# HELP ", 7) == 0, type = strncmp(buf, "# TYPE ", 7) == 0;
            if (!help && !type) {
                snprintf(err, errlen, "line %d: comment that is neither HELP nor TYPE: %.120s",
                         lineno, buf);
                return false;
            }
            const char *name = buf + 7;
            const char *sp = strchr(name, ' ');
            if (sp == NULL || !prom_name_ok(name, (size_t)(sp - name)) || sp[1] == '\0') {
                snprintf(err, errlen, "line %d: malformed: %.120s", lineno, buf);
                return false;
            }
            char fname[96];
            snprintf(fname, sizeof fname, "%.*s", (int)(sp - name), name);
            struct prom_family *f = prom_family_get(p, fname);
            if (f == NULL) {
                if (p->nf == sizeof p->f / sizeof p->f[0]) {
                    snprintf(err, errlen, "too many families");
                    return false;
                }
                f = &p->f[p->nf++];
                snprintf(f->name, sizeof f->name, "%s", fname);
            }
            if (f->closed) {
                snprintf(err, errlen, "line %d: %.120s comes back after another family", lineno,
                         fname);
                return false;
            }
            prom_enter(p, f);
            if (help) {
                f->n_help++;
            } else {
                const char *t = sp + 1;
                if (strcmp(t, "counter") != 0 && strcmp(t, "gauge") != 0 &&
                    strcmp(t, "histogram") != 0) {
                    snprintf(err, errlen, "line %d: type \"%s\"", lineno, t);
                    return false;
                }
                snprintf(f->type, sizeof f->type, "%s", t);
                f->n_type++;
            }
            if (f->n_help > 1 || f->n_type > 1) {
                snprintf(err, errlen, "line %d: second %.120s for %.120s", lineno, help ? "HELP" : "TYPE",
                         fname);
                return false;
            }
            continue;
        }
        /* A sample: name[{labels}] value */
        if (p->n == cap) {
            cap *= 2;
            struct prom_sample *ns = realloc(p->s, cap * sizeof *p->s);
            ck_assert(ns != NULL);
            p->s = ns;
        }
        struct prom_sample *smp = &p->s[p->n];
        memset(smp, 0, sizeof *smp);
        const char *c = buf;
        size_t nl = strcspn(c, "{ ");
        if (!prom_name_ok(c, nl) || nl >= sizeof smp->name) {
            snprintf(err, errlen, "line %d: bad metric name: %.120s", lineno, buf);
            return false;
        }
        memcpy(smp->name, c, nl);
        c += nl;
        if (*c == '{') {
            c++;
            while (*c != '}') {
                size_t ln = strcspn(c, "=");
                if (smp->n_labels == PROM_MAX_LABELS || !prom_name_ok(c, ln) || ln >= 32 ||
                    c[ln] != '=' || c[ln + 1] != '"') {
                    snprintf(err, errlen, "line %d: bad label: %.120s", lineno, buf);
                    return false;
                }
                memcpy(smp->lname[smp->n_labels], c, ln);
                c += ln + 2;
                size_t vi = 0;
                while (*c != '"') {
                    if (*c == '\0' || vi + 2 >= 64) {
                        snprintf(err, errlen, "line %d: unterminated label value: %.120s", lineno,
                                 buf);
                        return false;
                    }
                    if (*c == '\\') {
                        if (c[1] != '\\' && c[1] != '"' && c[1] != 'n') {
                            snprintf(err, errlen, "line %d: bad escape in label value: %.120s",
                                     lineno, buf);
                            return false;
                        }
                        smp->lvalue[smp->n_labels][vi++] = c[1] == 'n' ? '\n' : c[1];
                        c += 2;
                    } else {
                        smp->lvalue[smp->n_labels][vi++] = *c++;
                    }
                }
                c++;
                for (size_t k = 0; k < smp->n_labels; k++)
                    if (strcmp(smp->lname[k], smp->lname[smp->n_labels]) == 0) {
                        snprintf(err, errlen, "line %d: label repeated: %.120s", lineno, buf);
                        return false;
                    }
                smp->n_labels++;
                if (*c == ',')
                    c++;
                else if (*c != '}') {
                    snprintf(err, errlen, "line %d: expected , or }: %.120s", lineno, buf);
                    return false;
                }
            }
            c++;
        }
        if (*c != ' ') {
            snprintf(err, errlen, "line %d: no space before the value: %.120s", lineno, buf);
            return false;
        }
        c++;
        if (strcmp(c, "+Inf") == 0) {
            smp->value = INFINITY;
        } else {
            char *end;
            smp->value = strtod(c, &end);
            if (end == c || *end != '\0' || isnan(smp->value)) {
                snprintf(err, errlen, "line %d: bad value: %.120s", lineno, buf);
                return false;
            }
        }
        struct prom_family *f = prom_family_of(p, smp->name);
        if (f == NULL || f->n_help != 1 || f->n_type != 1) {
            snprintf(err, errlen, "line %d: sample of a family without HELP and TYPE before it: %.120s",
                     lineno, buf);
            return false;
        }
        if (f->closed) {
            snprintf(err, errlen, "line %d: sample of %.120s after another family", lineno, f->name);
            return false;
        }
        prom_enter(p, f);
        if (strcmp(f->type, "counter") == 0 && smp->value < 0) {
            snprintf(err, errlen, "line %d: negative counter: %.120s", lineno, buf);
            return false;
        }
        /* No duplicate series. */
        for (size_t k = 0; k < p->n; k++) {
            const struct prom_sample *o = &p->s[k];
            if (strcmp(o->name, smp->name) != 0 || o->n_labels != smp->n_labels)
                continue;
            bool same = true;
            for (size_t a = 0; a < o->n_labels && same; a++) {
                bool found = false;
                for (size_t b = 0; b < smp->n_labels; b++)
                    found = found || (strcmp(o->lname[a], smp->lname[b]) == 0 &&
                                      strcmp(o->lvalue[a], smp->lvalue[b]) == 0);
                same = found;
            }
            if (same) {
                snprintf(err, errlen, "line %d: duplicate series: %.120s", lineno, buf);
                return false;
            }
        }
        p->n++;
    }
    for (size_t i = 0; i < p->nf; i++)
        if (p->f[i].n_help != 1 || p->f[i].n_type != 1) {
            snprintf(err, errlen, "family %.120s: %d HELP, %d TYPE", p->f[i].name, p->f[i].n_help,
                     p->f[i].n_type);
            return false;
        }
    return true;
}

void prom_free(struct prom *p)
{
    free(p->s);
    memset(p, 0, sizeof *p);
}

const char *prom_label(const struct prom_sample *s, const char *name)
{
    for (size_t i = 0; i < s->n_labels; i++)
        if (strcmp(s->lname[i], name) == 0)
            return s->lvalue[i];
    return NULL;
}

/* The value of series `name` with exactly the labels given as (name, value) pairs, NULL-ended;
 * NAN if absent. */
double prom_get(const struct prom *p, const char *name, ...)
{
    const char *ln[PROM_MAX_LABELS], *lv[PROM_MAX_LABELS];
    size_t n = 0;
    va_list ap;
    va_start(ap, name);
    for (const char *k; n < PROM_MAX_LABELS && (k = va_arg(ap, const char *)) != NULL; n++) {
        ln[n] = k;
        lv[n] = va_arg(ap, const char *);
    }
    va_end(ap);
    for (size_t i = 0; i < p->n; i++) {
        const struct prom_sample *s = &p->s[i];
        if (strcmp(s->name, name) != 0 || s->n_labels != n)
            continue;
        bool ok = true;
        for (size_t k = 0; k < n && ok; k++) {
            const char *v = prom_label(s, ln[k]);
            ok = v != NULL && strcmp(v, lv[k]) == 0;
        }
        if (ok)
            return s->value;
    }
    return NAN;
}

/* GET /metrics (no auth) and parse it; the test fails if it is not valid Prometheus text. The
 * raw text is returned in *text if not NULL (caller frees). */
void metrics(const fg_server *s, struct prom *p, char **text)
{
    fg_response r;
    admin_call(s, "GET", "/metrics", NULL, NULL, &r);
    assert_status(&r, 200);
    ck_assert_msg(strncmp(r.content_type, "text/plain", 10) == 0, "/metrics Content-Type \"%s\"",
                  r.content_type);
    char err[512];
    bool ok = prom_parse(r.body, p, err, sizeof err);
    ck_assert_msg(ok, "/metrics is not valid Prometheus text: %s\n%.4000s", err, r.body);
    if (text != NULL) {
        *text = strdup(r.body);
        ck_assert(*text != NULL);
    }
    fg_response_fini(&r);
}

double metric1(const fg_server *s, const char *name, const char *lk, const char *lv)
{
    struct prom p;
    metrics(s, &p, NULL);
    double v = lk != NULL ? prom_get(&p, name, lk, lv, NULL) : prom_get(&p, name, NULL);
    prom_free(&p);
    return v;
}

/* Poll until the gauge/counter reaches `want`, at most timeout_ms. Returns the last value. */
double wait_metric(const fg_server *s, const char *name, const char *lk, const char *lv,
                   double want, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        double v = metric1(s, name, lk, lv);
        if (v == want || fg_now_ms() > deadline)
            return v;
        fg_pause_ms(5);
    }
}

const char *const ROUTES[N_ROUTES] = {"confirm", "cancel", "read", "virtual_account", "default"};
const char *const OUTCOMES[N_OUTCOMES] = {"ok", "replayed", "conflict", "business_error",
                                          "invalid", "unauthorized", "throttled", "capped",
                                          "dropped_request", "dropped_response", "fault_error"};
