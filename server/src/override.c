/* override.c -- per-request overrides (see override.h). The fault grammar is turned into the
 * profile JSON it abbreviates and validated by profile.c, so a header and a profile accept and
 * reject exactly the same faults. */
#define _POSIX_C_SOURCE 200809L
#include "override.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        *--e = '\0';
    return s;
}

/* A value as JSON: a number, true/false, a list of numbers for attempts, else a string;
 * retry_after is the profile's object: retry_after=5 is {"format":"seconds","value":5},
 * retry_after=auto is the same with "auto", another word is a format (http-date, none). */
static json_t *value_of(const char *key, const char *v)
{
    char *end;
    double d = strtod(v, &end);
    if (strcmp(key, "retry_after") == 0) {
        size_t digits = strspn(v, "0123456789");
        if (digits > 0 && digits <= 15 && !v[digits]) /* whole seconds, decimal only */
            return json_pack("{s:s,s:I}", "format", "seconds", "value",
                             (json_int_t)strtoll(v, NULL, 10));
        if (strcmp(v, "auto") == 0)
            return json_pack("{s:s,s:s}", "format", "seconds", "value", "auto");
        if (*v && !*end) /* 1.5, 1e1, 0x10: a number, but not whole seconds: refused there */
            return json_pack("{s:s,s:f}", "format", "seconds", "value", d);
        return json_pack("{s:s}", "format", v);
    }
    if (strcmp(key, "attempts") == 0) { /* before numbers: attempts=1 is the list [1] */
        json_t *a = json_array();
        char *copy = strdup(v), *save = NULL;
        for (char *t = copy ? strtok_r(copy, ",[] ", &save) : NULL; t;
             t = strtok_r(NULL, ",[] ", &save))
            json_array_append_new(a, json_integer(strtoll(t, NULL, 10)));
        free(copy);
        return a;
    }
    if (*v && !*end && isfinite(d)) {
        if (d == floor(d) && fabs(d) < 9e15)
            return json_integer((json_int_t)d);
        return json_real(d);
    }
    if (strcmp(v, "true") == 0)
        return json_true();
    if (strcmp(v, "false") == 0)
        return json_false();
    return json_string(v);
}

int override_fault_parse(const char *header, struct profile **out, char err[ERR_LEN])
{
    *out = NULL;
    char *copy = strdup(header);
    if (!copy) {
        snprintf(err, ERR_LEN, "out of memory");
        return -1;
    }
    json_t *fault = json_object();
    char *save = NULL;
    int n = 0;
    for (char *part = strtok_r(copy, ";", &save); part; part = strtok_r(NULL, ";", &save), n++) {
        char *t = trim(part);
        char *eq = strchr(t, '=');
        if (n == 0 && !eq) {
            json_object_set_new(fault, "kind", json_string(t));
            continue;
        }
        if (!eq || eq == t) {
            snprintf(err, ERR_LEN, "X-Fakegate-Fault: expected key=value, got \"%.100s\"", t);
            goto fail;
        }
        *eq = '\0';
        char *k = trim(t), *v = trim(eq + 1);
        if (json_object_get(fault, k)) {
            snprintf(err, ERR_LEN, "X-Fakegate-Fault: \"%.60s\" given twice", k);
            goto fail;
        }
        json_object_set_new(fault, k, value_of(k, v));
    }
    if (!json_object_get(fault, "kind")) {
        snprintf(err, ERR_LEN, "X-Fakegate-Fault: the fault's kind comes first "
                               "(error, drop_request, drop_response or drip)");
        goto fail;
    }
    if (!json_object_get(fault, "p"))
        json_object_set_new(fault, "p", json_integer(1));
    char *text = json_dumps(fault, JSON_COMPACT);
    char perr[ERR_LEN] = "out of memory";
    int rc = text ? profile_parse_fault(text, strlen(text), out, perr) : -1;
    free(text);
    if (rc != 0) {
        snprintf(err, ERR_LEN, "X-Fakegate-Fault: %.400s", perr);
        goto fail;
    }
    json_decref(fault);
    free(copy);
    return 0;
fail:
    json_decref(fault);
    free(copy);
    return -1;
}

int override_latency_parse(const char *header, double *ms, char err[ERR_LEN])
{
    /* Plain decimal only (no hex, exponent or sign): "2500" or "2.5". */
    size_t digits = strspn(header, "0123456789");
    const char *rest = header + digits;
    if (*rest == '.' && digits > 0)
        rest += 1 + strspn(rest + 1, "0123456789");
    char *end;
    double v = strtod(header, &end);
    if (digits == 0 || *rest || end != rest || !isfinite(v) || v > 86400000) {
        snprintf(err, ERR_LEN, "X-Fakegate-Latency-Ms: expected milliseconds from 0 to 86400000, "
                               "got \"%.60s\"", header);
        return -1;
    }
    *ms = v;
    return 0;
}
