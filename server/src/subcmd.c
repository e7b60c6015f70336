/* subcmd.c -- `fakegate probe` and `fakegate report` (docs/cli.md §1): their flags (each also
 * read from the server's FAKEGATE_* variable; flags win), where the server is (--host, --port,
 * or the port number in --port-file), and what each prints and returns. One GET per attempt
 * through cli_http.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "cli_http.h"
#include "jsonpos.h"
#include "subcmd.h"

/* One attempt of probe waits at most this long. */
#define PROBE_ATTEMPT_MS 2000
/* Pause between two attempts of probe --timeout. */
#define PROBE_PAUSE_MS 50
/* How long report waits for the server's answer. */
#define REPORT_TIMEOUT_MS 30000
/* Largest --timeout, in seconds (one day). */
#define MAX_TIMEOUT_S 86400.0
/* Room for "HOST:PORT" or "HOST (port from PATH)". */
#define PATH_MAX_WHERE 4352
/* Longest --tenant: a secret key, sent as one header line. */
#define TENANT_MAX 256

const char *const subcmd_names[] = {"probe", "report", NULL};

/* Where the server is, and the subcommand's own settings. */
struct target {
    const char *cmd;         /* "probe" or "report", for messages */
    const char *host;
    const char *port_s;      /* as given; checked by parse_port */
    const char *port_src;    /* "--port" or "FAKEGATE_PORT" */
    const char *port_file;
    double timeout_s;        /* probe only */
    const char *admin_token; /* report only */
    const char *tenant;      /* report only: X-Fakegate-Tenant, or NULL */
    bool port_flag, port_file_flag; /* given on the command line */
};

enum flag { F_HOST, F_PORT, F_PORT_FILE, F_TIMEOUT, F_ADMIN_TOKEN, F_TENANT, F_HELP, F_COUNT };
static const char *const flag_names[F_COUNT + 1] = {"host", "port", "port-file", "timeout",
                                                    "admin-token", "tenant", "help", NULL};

/* Flag k belongs to the other subcommand. */
static bool not_ours(int k, bool is_probe)
{
    return is_probe ? k == F_ADMIN_TOKEN || k == F_TENANT : k == F_TIMEOUT;
}

/* A secret key fit for one header line: 1 .. TENANT_MAX visible ASCII characters. */
static bool tenant_valid(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return false;
    return n > 0 && n <= TENANT_MAX;
}

static bool parse_port(const char *s, unsigned *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v == 0 || v > 65535)
        return false;
    *out = (unsigned)v;
    return true;
}

static void usage(FILE *f, const char *cmd)
{
    if (strcmp(cmd, "probe") == 0)
        fputs("usage: fakegate probe [--host ADDR] [--port N | --port-file PATH] "
              "[--timeout SECONDS]\n"
              "exit 0 (silently) once a server answers GET /healthz with 200; ask once, or retry\n"
              "until --timeout seconds (fractional) have passed, then exit 1; 2: usage error\n",
              f);
    else
        fputs("usage: fakegate report [--host ADDR] [--port N | --port-file PATH] "
              "[--admin-token TOKEN] [--tenant KEY]\n"
              "print the findings of GET /__admin/report (--tenant: only that secret key's, sent\n"
              "as X-Fakegate-Tenant); exit 0 if there are none, 1 if there are, 2 if no server\n"
              "answers or the answer is not a report\n",
              f);
}

/* Parse argv[2..] into *t. 0 go on, 1 help printed (exit 0), -1 usage error printed (exit 2). */
static int parse_args(struct target *t, int argc, char **argv, bool is_probe)
{
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, t->cmd);
            return 1;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "fakegate %s: unexpected argument '%s' (see fakegate %s --help)\n",
                    t->cmd, a, t->cmd);
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq ? (size_t)(eq - name) : strlen(name)), name);
        int id = -1;
        for (int k = 0; k < F_COUNT; k++)
            if (strcmp(key, flag_names[k]) == 0)
                id = k;
        if (id == F_HELP) {
            usage(stdout, t->cmd);
            return 1;
        }
        if (id < 0 || not_ours(id, is_probe)) {
            const char *own[F_COUNT + 1], **o = own;
            for (int k = 0; k < F_COUNT; k++)
                if (!not_ours(k, is_probe))
                    *o++ = flag_names[k];
            *o = NULL;
            const char *hint = jsonpos_suggest(key, own);
            fprintf(stderr, "fakegate %s: unknown option '--%s'%s%s%s\n", t->cmd, key,
                    hint ? "; did you mean --" : "", hint ? hint : "",
                    hint ? "?" : " (see --help)");
            return -1;
        }
        const char *val = eq ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        if (!val) {
            fprintf(stderr, "fakegate %s: --%s needs a value\n", t->cmd, key);
            return -1;
        }
        switch ((enum flag)id) {
        case F_HOST: t->host = val; break;
        case F_PORT: t->port_s = val, t->port_src = "--port", t->port_flag = true; break;
        case F_PORT_FILE: t->port_file = val, t->port_file_flag = true; break;
        case F_ADMIN_TOKEN: t->admin_token = val; break;
        case F_TENANT:
            if (!tenant_valid(val)) {
                fprintf(stderr, "fakegate report: --tenant: a secret key of 1-%d visible ASCII "
                                "characters\n", TENANT_MAX);
                return -1;
            }
            t->tenant = val;
            break;
        case F_TIMEOUT: {
            char *end;
            errno = 0;
            double v = strtod(val, &end);
            if (errno || end == val || *end || !isfinite(v) || v < 0 || v > MAX_TIMEOUT_S) {
                fprintf(stderr, "fakegate probe: --timeout %s: must be 0-%.0f seconds "
                                "(fractions allowed)\n", val, MAX_TIMEOUT_S);
                return -1;
            }
            t->timeout_s = v;
            break;
        }
        case F_HELP:
        case F_COUNT:
            break;
        }
    }
    return 0;
}

/* Defaults from the environment, then the flags; check the port. 0, 1 (help) or -1 (usage). */
static int setup(struct target *t, const char *cmd, int argc, char **argv)
{
    memset(t, 0, sizeof *t);
    t->cmd = cmd;
    t->host = getenv("FAKEGATE_HOST") ? getenv("FAKEGATE_HOST") : "127.0.0.1";
    t->port_file = getenv("FAKEGATE_PORT_FILE");
    if (t->port_file && !*t->port_file)
        t->port_file = NULL;
    t->port_s = getenv("FAKEGATE_PORT") ? getenv("FAKEGATE_PORT") : "8080";
    t->port_src = getenv("FAKEGATE_PORT") ? "FAKEGATE_PORT" : "--port";
    t->admin_token = getenv("FAKEGATE_ADMIN_TOKEN");
    int rc = parse_args(t, argc, argv, strcmp(cmd, "probe") == 0);
    if (rc != 0)
        return rc;
    if (t->port_flag && t->port_file_flag) {
        fprintf(stderr, "fakegate %s: --port and --port-file: give one of them\n", cmd);
        return -1;
    }
    if (t->port_flag)
        t->port_file = NULL; /* a --port flag wins over FAKEGATE_PORT_FILE */
    unsigned port;
    if (!t->port_file && !parse_port(t->port_s, &port)) {
        fprintf(stderr, "fakegate %s: %s %s: must be 1-65535\n", cmd, t->port_src, t->port_s);
        return -1;
    }
    /* A server listening on every interface answers on loopback. */
    if (strcmp(t->host, "0.0.0.0") == 0)
        t->host = "127.0.0.1";
    else if (strcmp(t->host, "::") == 0)
        t->host = "::1";
    return 0;
}

/* The port to talk to now: --port, or the number in the port file. 0, or -1 with why. */
static int current_port(const struct target *t, unsigned *port, char err[ERR_LEN])
{
    if (!t->port_file)
        return parse_port(t->port_s, port) ? 0 : -1;
    FILE *f = fopen(t->port_file, "r");
    if (!f) {
        snprintf(err, ERR_LEN, "port file %s: %s", t->port_file, strerror(errno));
        return -1;
    }
    char buf[32] = "";
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    if (!parse_port(buf, port)) {
        snprintf(err, ERR_LEN, "port file %s holds no port number", t->port_file);
        return -1;
    }
    return 0;
}

/* "HOST:PORT", the IPv6 address in brackets. */
static void where(const struct target *t, unsigned port, char *buf, size_t size)
{
    bool v6 = strchr(t->host, ':') != NULL;
    if (port)
        snprintf(buf, size, "%s%s%s:%u", v6 ? "[" : "", t->host, v6 ? "]" : "", port);
    else
        snprintf(buf, size, "%s%s%s (port from %s)", v6 ? "[" : "", t->host, v6 ? "]" : "",
                 t->port_file);
}

static void pause_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int subcmd_probe(int argc, char **argv)
{
    struct target t;
    int rc = setup(&t, "probe", argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    int64_t start = now_mono_ns(), deadline = start + (int64_t)(t.timeout_s * (double)NS_PER_S);
    char why[ERR_LEN] = "";
    unsigned port = 0;
    for (;;) {
        int64_t left_ms = (deadline - now_mono_ns()) / NS_PER_MS;
        int64_t attempt_ms = t.timeout_s == 0 ? PROBE_ATTEMPT_MS
                             : left_ms < PROBE_ATTEMPT_MS ? left_ms : PROBE_ATTEMPT_MS;
        if (attempt_ms < 1)
            attempt_ms = 1;
        struct cli_http_response r;
        unsigned p;
        if (current_port(&t, &p, why) == 0) {
            port = p;
            if (cli_http_get(t.host, port, "/healthz", NULL, attempt_ms, &r, why) == 0) {
                int status = r.status;
                cli_http_response_fini(&r);
                if (status == 200)
                    return 0;
                snprintf(why, sizeof why, "GET /healthz answered %d", status);
            }
        }
        int64_t now = now_mono_ns();
        if (now >= deadline)
            break;
        int64_t pause = (deadline - now) / NS_PER_MS;
        pause_ms(pause < PROBE_PAUSE_MS ? (pause < 1 ? 1 : pause) : PROBE_PAUSE_MS);
    }
    char at[PATH_MAX_WHERE];
    where(&t, port, at, sizeof at);
    if (t.timeout_s > 0)
        fprintf(stderr, "fakegate probe: no healthy server at %s within %g s (%s)\n", at,
                t.timeout_s, why);
    else
        fprintf(stderr, "fakegate probe: no healthy server at %s (%s)\n", at, why);
    return 1;
}

/* --- report ------------------------------------------------------------------------------- */

/* A JSON value as text for the report: a string as it is, anything else as compact JSON. */
static void print_value(const json_t *v)
{
    if (json_is_string(v)) {
        fputs(json_string_value(v), stdout);
        return;
    }
    char *s = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    fputs(s ? s : "?", stdout);
    free(s);
}

static void print_finding(const json_t *f)
{
    print_value(json_object_get(f, "kind"));
    fputs(": ", stdout);
    print_value(json_object_get(f, "count"));
    fputs(json_integer_value(json_object_get(f, "count")) == 1 ? " time\n" : " times\n", stdout);
    static const char *const fields[] = {"rule", "threshold"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *v = json_object_get(f, fields[i]);
        if (v) {
            printf("  %-10s ", fields[i]);
            print_value(v);
            fputc('\n', stdout);
        }
    }
    const json_t *ex = json_object_get(f, "examples");
    if (json_is_array(ex) && json_array_size(ex) > 0) {
        printf("  %-10s ", "examples");
        for (size_t i = 0; i < json_array_size(ex); i++) {
            fputs(i ? ", " : "", stdout);
            print_value(json_array_get(ex, i));
        }
        fputc('\n', stdout);
    }
}

/* "judged N requests since T, complete" when the report says so; "" otherwise. */
static void coverage(const json_t *rep, char *buf, size_t size)
{
    const json_t *judged = json_object_get(rep, "judged_requests");
    const json_t *since = json_object_get(rep, "since");
    const json_t *complete = json_object_get(rep, "complete");
    size_t w = 0;
    buf[0] = '\0';
    if (json_is_integer(judged))
        w += (size_t)snprintf(buf + w, size - w, "judged %lld requests",
                              (long long)json_integer_value(judged));
    if (json_is_string(since) && w < size)
        w += (size_t)snprintf(buf + w, size - w, " since %s", json_string_value(since));
    if (json_is_boolean(complete) && w < size)
        snprintf(buf + w, size - w, "%s%s", w ? ", " : "",
                 json_is_true(complete) ? "complete" : "INCOMPLETE");
}

int subcmd_report(int argc, char **argv)
{
    struct target t;
    int rc = setup(&t, "report", argc, argv);
    if (rc != 0)
        return rc > 0 ? 0 : 2;
    char why[ERR_LEN], at[PATH_MAX_WHERE];
    unsigned port = 0;
    if (current_port(&t, &port, why) != 0) {
        where(&t, 0, at, sizeof at);
        fprintf(stderr, "fakegate report: no server at %s: %s\n", at, why);
        return 2;
    }
    where(&t, port, at, sizeof at);
    char auth[1024], tenant[TENANT_MAX + 32];
    const char *headers[3] = {NULL, NULL, NULL}, **h = headers;
    if (t.admin_token && *t.admin_token) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", t.admin_token);
        *h++ = auth;
    }
    if (t.tenant) {
        snprintf(tenant, sizeof tenant, "X-Fakegate-Tenant: %s", t.tenant);
        *h++ = tenant;
    }
    struct cli_http_response r;
    if (cli_http_get(t.host, port, "/__admin/report", headers, REPORT_TIMEOUT_MS, &r, why) != 0) {
        fprintf(stderr, "fakegate report: no server answers at %s: %s\n", at, why);
        return 2;
    }
    json_t *rep = json_loadb(r.body, r.body_len, 0, NULL);
    const json_t *findings = json_object_get(rep, "findings");
    if (r.status != 200 || !json_is_array(findings)) {
        const char *code = json_string_value(json_object_get(rep, "code"));
        const char *msg = json_string_value(json_object_get(rep, "message"));
        fprintf(stderr, "fakegate report: %s answered %d%s%s, not a report%s%s%s\n", at,
                r.status, code ? " " : "", code ? code : "",
                r.status == 401 ? " (give --admin-token or FAKEGATE_ADMIN_TOKEN)" : "",
                msg ? ": " : "", msg ? msg : "");
        json_decref(rep);
        cli_http_response_fini(&r);
        return 2;
    }
    char cov[256];
    coverage(rep, cov, sizeof cov);
    size_t n = json_array_size(findings);
    if (n == 0)
        printf("fakegate report, %s: no findings%s%s%s\n", at, cov[0] ? " (" : "", cov,
               cov[0] ? ")" : "");
    else
        printf("fakegate report, %s: %zu finding%s%s%s%s\n", at, n, n == 1 ? "" : "s",
               cov[0] ? " (" : "", cov, cov[0] ? ")" : "");
    const json_t *reason = json_object_get(rep, "reason");
    if (json_is_string(reason))
        printf("  incomplete: %s\n", json_string_value(reason));
    for (size_t i = 0; i < n; i++)
        print_finding(json_array_get(findings, i));
    fflush(stdout);
    json_decref(rep);
    cli_http_response_fini(&r);
    return n == 0 ? 0 : 1;
}

subcmd_fn subcmd_find(const char *word)
{
    if (strcmp(word, "probe") == 0)
        return subcmd_probe;
    if (strcmp(word, "report") == 0)
        return subcmd_report;
    return NULL;
}
