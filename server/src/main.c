/* main.c -- fakegate's entry point: the subcommands (subcmd.c), argv and FAKEGATE_* environment
 * → config (flags win), the profile (profile_find.c), signals (blocked in every thread, taken
 * with sigwait here), start, the ready line and port file, and the orderly stop. Exit codes
 * (docs/cli.md §1): 0 clean shutdown, 2 usage or configuration error, 1 runtime failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "body.h"
#include "cluster.h"
#include "cluster_journal.h"
#include "cluster_limits.h"
#include "common.h"
#include "config.h"
#include "http.h"
#include "gateway.h"
#include "jsonpos.h"
#include "profile.h"
#include "profile_find.h"
#include "observe.h"
#include "sched.h"
#include "statefile.h"
#include "subcmd.h"
#include "webhook.h"

#define MAX_SECRET_KEYS 64
#define MAX_COPIES (MAX_SECRET_KEYS + WEBHOOK_MAX_RECEIVERS)

/* Every flag, its argument, its environment variable and its help text: the one place a flag
 * is documented. Environment variable = FAKEGATE_ + the flag upper-cased, '-' → '_'. */
enum opt_id {
    O_HOST, O_PORT, O_PORT_FILE, O_PROFILE, O_PROFILES_DIR, O_SEED, O_SECRET_KEY, O_MID,
    O_THREADS, O_MAX_CONNECTIONS, O_MAX_BODY, O_MAX_JSON_DEPTH, O_IDEMPOTENCY_TTL, O_MAX_IDEMPOTENCY_RECORDS, O_MAX_PAYMENTS,
    O_SESSION_TTL, O_STRICT_SESSIONS, O_IDLE_TIMEOUT,
    O_CONSECUTIVE_CANCEL_MS, O_REPORT_MAX_IDENTITIES, O_WEBHOOK_URL, O_WEBHOOK_MAX_PENDING,
    O_MAX_TENANTS, O_JOURNAL_SIZE, O_STATE_FILE, O_STATE_FSYNC, O_STORE,
    O_CLUSTER_JOURNAL_MAX,
    O_ADMIN_TOKEN, O_LOG, O_QUIET,
    O_CHECK_PROFILE, O_VERSION, O_HELP, O_COUNT
};

struct opt {
    const char *name;   /* without "--" */
    const char *arg;    /* NULL for a switch */
    bool env;           /* has a FAKEGATE_* variable */
    const char *help;
};

static const struct opt opts[O_COUNT] = {
    [O_HOST] = {"host", "ADDR", true, "address to listen on (default 127.0.0.1; 0.0.0.0 = all interfaces; not loopback: a warning at start)"},
    [O_PORT] = {"port", "N", true, "TCP port (default 8080; 0 = pick a free port, see --port-file)"},
    [O_PORT_FILE] = {"port-file", "PATH", true, "write the bound port here once listening (atomic: temp file + rename); removed at exit"},
    [O_PROFILE] = {"profile", "NAME|PATH", true, "profile name (looked up in --profiles-dir) or JSON file path (default normal)"},
    [O_PROFILES_DIR] = {"profiles-dir", "DIR", true, "where profile names are looked up (default: <prefix>/share/fakegate/profiles, then profiles/ next to the binary's parent, then ./profiles)"},
    [O_SEED] = {"seed", "N", true, "seed (unsigned 64-bit) for every random decision; default: the profile's \"seed\", else random (printed in the ready line)"},
    [O_SECRET_KEY] = {"secret-key", "KEY", true, "accepted secret key (repeatable; env: comma-separated); default: any key starting test_sk_ or test_gsk_"},
    [O_MID] = {"mid", "MID", true, "merchant id in Payment.mId (default tgen_fakegate)"},
    [O_THREADS] = {"threads", "N", true, "libmicrohttpd worker threads that accept, read and answer requests, 1-64 (default 2; held requests take no thread)"},
    [O_MAX_CONNECTIONS] = {"max-connections", "N", true, "connections open at once, 1-1048576 (default: the open-files limit minus 64); beyond it new connections wait in the listen backlog until one closes"},
    [O_MAX_BODY] = {"max-body", "BYTES", true, "largest request body in bytes; larger → 413 (default 65536)"},
    [O_MAX_JSON_DEPTH] = {"max-json-depth", "N", true, "how deeply a request body may nest objects and arrays, 1-2048 (default 32); deeper → 400 INVALID_REQUEST, refused before it is parsed"},
    [O_IDEMPOTENCY_TTL] = {"idempotency-ttl", "SECONDS", true, "how long an Idempotency-Key record lives, and an unused attempt count or report identity (default 1296000 = 15 days, as Toss)"},
    [O_MAX_IDEMPOTENCY_RECORDS] = {"max-idempotency-records", "N", true, "Idempotency-Key records one tenant keeps at once (default 1000000, about 380 MB); a new key beyond it → 503 SERVICE_UNAVAILABLE"},
    [O_MAX_PAYMENTS] = {"max-payments", "N", true, "payments one tenant's ledger keeps (default 1000000, about 940 MB); a request that would create one beyond it → 503 SERVICE_UNAVAILABLE"},
    [O_SESSION_TTL] = {"session-ttl", "SECONDS", true, "payment session lifetime (default 600, Toss's 10-minute window)"},
    [O_STRICT_SESSIONS] = {"strict-sessions", NULL, true, "an unknown paymentKey → 404 NOT_FOUND_PAYMENT_SESSION (default: lenient)"},
    [O_IDLE_TIMEOUT] = {"idle-timeout", "SECONDS", true, "close idle keep-alive connections after this many seconds (default 30; 0 = never)"},
    [O_CONSECUTIVE_CANCEL_MS] = {"consecutive-cancel-ms", "MS", true, "a cancel within this many ms of the payment's previous cancel → 403 FORBIDDEN_CONSECUTIVE_REQUEST (default 1000, as Toss; 0 = off)"},
    [O_REPORT_MAX_IDENTITIES] = {"report-max-identities", "N", true, "identities the report keeps state for at once, since the last reset (default 1000000; one unused for --idempotency-ttl is forgotten); beyond it the report says complete: false"},
    [O_WEBHOOK_URL] = {"webhook-url", "URL", true, "webhook receiver, http://host[:port]/path (repeatable, at most 16; env: comma-separated); PUT /__admin/webhooks replaces them at run time"},
    [O_WEBHOOK_MAX_PENDING] = {"webhook-max-pending", "N", true, "webhook deliveries pending at once (default 10000); beyond it the oldest is failed, fakegate_webhook_evicted_total counts it"},
    [O_MAX_TENANTS] = {"max-tenants", "N", true, "distinct secret keys (tenants) one server keeps state for (default 10000); a new key beyond it → 503 SERVICE_UNAVAILABLE"},
    [O_JOURNAL_SIZE] = {"journal-size", "N", true, "requests the journal (GET /__admin/requests) keeps, 1-1000000 (default 10000; about 0.4 KB an entry, taken at start)"},
    [O_STATE_FILE] = {"state-file", "PATH", true, "keep the ledger and the Idempotency-Key records in this append-only file (created 0600 if missing), each change written before its answer leaves; at start the file is replayed and a request left PROCESSING by a crash is released (docs/state-file.md)"},
    [O_STATE_FSYNC] = {"state-fsync", "POLICY", true, "never (default: write(2) before the answer; survives a crash or SIGKILL of fakegate, not of the machine) or always (fdatasync(2) too: survives power loss, a disk flush per change)"},
    [O_STORE] = {"store", "URL", true, "where the ledger, the Idempotency-Key records, attempt counters, the gateway clock and the profile in force (with its budgets, buckets and caps) live: memory (the default, this process only) or redis://HOST:PORT[/DB], a Redis shared by several instances behind a load balancer (HOST a name or IPv4 address, PORT 1-65535, DB 0-15, default 0); a request that cannot reach it gets 503 SERVICE_UNAVAILABLE naming it; not with --state-file (docs/cluster.md)"},
    [O_CLUSTER_JOURNAL_MAX] = {"cluster-journal-max", "N", true, "with --store redis://: the shared journal's bound, the requests of every instance that GET /__admin/requests and GET /__admin/report read from Redis, 1-10000000 (default 200000; about 0.5 KB of Redis memory an entry; older entries are trimmed and the report then says it is incomplete; docs/cluster.md)"},
    [O_ADMIN_TOKEN] = {"admin-token", "TOKEN", true, "require 'Authorization: Bearer TOKEN' on /__admin routes (not /__admin/health and the live page's files; /healthz and /metrics stay open; compared in constant time)"},
    [O_LOG] = {"log", "FORMAT", true, "access log on stderr, one line per request: text (default) or json"},
    [O_QUIET] = {"quiet", NULL, true, "no access log and no start-up notes on stderr (errors still print)"},
    [O_CHECK_PROFILE] = {"check-profile", "NAME|PATH", false, "validate a profile (a name, built in or in --profiles-dir, or a file) and exit: 0 valid, 2 invalid (file:line:column: message)"},
    [O_VERSION] = {"version", NULL, false, "print the version and exit (also -V)"},
    [O_HELP] = {"help", NULL, false, "print this help and exit (also -h)"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: fakegate [options]\n"
               "       fakegate --check-profile NAME|PATH\n"
               "       fakegate probe [--host ADDR] [--port N | --port-file PATH] [--timeout SECONDS]\n"
               "                 exit 0 once a server answers GET /healthz (retry up to SECONDS)\n"
               "       fakegate report [--host ADDR] [--port N | --port-file PATH] [--admin-token TOKEN]\n"
               "                       [--tenant KEY]\n"
               "                 print GET /__admin/report (--tenant: that secret key's only);\n"
               "                 exit 0 no findings, 1 findings, 2 no server\n\n"
               "A fake Toss-Payments-like gateway for integration tests. Options (each also read from\n"
               "the environment variable shown; flags win over the environment):\n");
    for (int i = 0; i < O_COUNT; i++) {
        char left[64], env[48] = "";
        snprintf(left, sizeof left, "--%s%s%s", opts[i].name, opts[i].arg ? " " : "",
                 opts[i].arg ? opts[i].arg : "");
        if (opts[i].env) {
            size_t k = (size_t)snprintf(env, sizeof env, "  [FAKEGATE_");
            for (const char *p = opts[i].name; *p && k + 2 < sizeof env; p++)
                env[k++] = *p == '-' ? '_' : (char)(*p - ('a' <= *p && *p <= 'z' ? 32 : 0));
            snprintf(env + k, sizeof env - k, "]");
        }
        fprintf(f, "  %-28s %s%s\n", left, opts[i].help, env);
    }
}

static int find_opt(const char *name, size_t len)
{
    for (int i = 0; i < O_COUNT; i++)
        if (strlen(opts[i].name) == len && strncmp(opts[i].name, name, len) == 0)
            return i;
    return -1;
}

/* "unknown option '--thraeds'; did you mean --threads?": the closest flag by edit distance,
 * when it is at most two edits away. `len` bytes of `a`, starting with `dashes` dashes, name
 * the option. */
static void unknown_option(const char *a, size_t len, size_t dashes)
{
    const char *names[O_COUNT + 1];
    for (int i = 0; i < O_COUNT; i++)
        names[i] = opts[i].name;
    names[O_COUNT] = NULL;
    char key[96];
    size_t n = len - dashes < sizeof key - 1 ? len - dashes : sizeof key - 1;
    snprintf(key, sizeof key, "%.*s", (int)n, a + dashes);
    const char *hint = jsonpos_suggest(key, names);
    fprintf(stderr, "fakegate: unknown option '%.*s'%s%s%s\n", (int)len, a,
            hint ? "; did you mean --" : "", hint ? hint : "", hint ? "?" : " (see --help)");
}

struct cli {
    struct config cfg;
    const char *secret_keys[MAX_SECRET_KEYS];
    bool keys_from_flags;
    const char *webhook_urls[WEBHOOK_MAX_RECEIVERS];
    bool urls_from_flags;
    char *copies[MAX_COPIES]; /* the strings secret_keys and webhook_urls point into */
    size_t n_copies;
    const char *check_profile;
};

static bool parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (!s || !*s || *s == '-')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return false;
    *out = v;
    return true;
}

/* What a valid value of option `id` is, for the message that refuses one (docs/cli.md §1). */
static const char *accepted(int id)
{
    switch ((enum opt_id)id) {
    case O_PORT: return "must be 0-65535";
    case O_SEED: return "must be 0-18446744073709551615, in decimal";
    case O_SECRET_KEY: return "must hold at least one key (comma-separated)";
    case O_MID: return "must not be empty";
    case O_LOG: return "must be text or json";
    case O_STATE_FILE: return "must not be empty";
    case O_STATE_FSYNC: return "must be never or always";
    case O_THREADS: return "must be 1-64";
    case O_MAX_CONNECTIONS: return "must be 1-1048576 (connections)";
    case O_MAX_BODY: return "must be 1-1073741824 (bytes)";
    case O_MAX_JSON_DEPTH: return "must be 1-2048 (levels)";
    case O_IDEMPOTENCY_TTL:
    case O_SESSION_TTL: return "must be 1-9223372036 (seconds)";
    case O_MAX_IDEMPOTENCY_RECORDS: return "must be 1-4294967295 (records)";
    case O_MAX_PAYMENTS: return "must be 1-4294967295 (payments)";
    case O_IDLE_TIMEOUT: return "must be 0-86400 (seconds; 0 = never)";
    case O_CONSECUTIVE_CANCEL_MS: return "must be 0-86400000 (milliseconds; 0 = off)";
    case O_REPORT_MAX_IDENTITIES: return "must be 1-4294967295 (identities)";
    case O_WEBHOOK_URL: return "must hold at least one URL (comma-separated)";
    case O_WEBHOOK_MAX_PENDING: return "must be 1-4294967295 (deliveries)";
    case O_MAX_TENANTS: return "must be 1-1000000 (tenants)";
    case O_JOURNAL_SIZE: return "must be 1-1000000 (entries)";
    case O_CLUSTER_JOURNAL_MAX: return "must be 1-10000000 (entries)";
    case O_STRICT_SESSIONS:
    case O_QUIET: return "must be 1, true, yes, 0, false or no";
    default: return "invalid value";
    }
}

/* Add the comma-separated items of `val` (spaces around each trimmed, empty ones skipped) to
 * list[*n], at most `max`; the first flag replaces what the environment gave (*from_flags
 * remembers it). `what` names the flag in messages. 0, or -1 (printed). */
static int append_list(struct cli *c, const char *val, const char *src, bool *from_flags,
                       const char **list, size_t *n, size_t max, const char *what)
{
    if (strcmp(src, "flag") == 0 && !*from_flags) {
        *n = 0; /* flags replace the environment's list */
        *from_flags = true;
    }
    char *copy = strdup(val), *save = NULL;
    if (!copy || c->n_copies == MAX_COPIES) {
        free(copy);
        fprintf(stderr, "fakegate: %s: too many values\n", what);
        return -1;
    }
    c->copies[c->n_copies++] = copy;
    for (char *k = strtok_r(copy, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
        /* "a, b" as a list is written in YAML and compose files: spaces around an item are
         * not part of it. */
        k += strspn(k, " \t");
        size_t len = strlen(k);
        while (len > 0 && (k[len - 1] == ' ' || k[len - 1] == '\t'))
            k[--len] = '\0';
        if (len == 0)
            continue;
        if (*n == max) {
            fprintf(stderr, "fakegate: %s: at most %zu values\n", what, max);
            return -1;
        }
        list[(*n)++] = k; /* points into c->copies */
    }
    return 0;
}

/* Apply one option value. `src` names where it came from, for messages. 0 or -1 (printed). */
static int apply(struct cli *c, int id, const char *val, const char *src)
{
    uint64_t v = 0;
    struct config *cfg = &c->cfg;
    switch ((enum opt_id)id) {
    case O_HOST: cfg->host = val; return 0;
    case O_PORT:
        if (!parse_u64(val, 65535, &v))
            goto bad;
        cfg->port = (unsigned)v;
        return 0;
    case O_PORT_FILE: cfg->port_file = val; return 0;
    case O_PROFILE: cfg->profile = val; return 0;
    case O_PROFILES_DIR: cfg->profiles_dir = val; return 0;
    case O_SEED:
        if (!parse_u64(val, UINT64_MAX, &v))
            goto bad;
        cfg->has_seed = true;
        cfg->seed = v;
        return 0;
    case O_SECRET_KEY: {
        bool replaces = strcmp(src, "flag") == 0 && !c->keys_from_flags;
        size_t before = replaces ? 0 : cfg->n_secret_keys;
        if (append_list(c, val, src, &c->keys_from_flags, c->secret_keys, &cfg->n_secret_keys,
                        MAX_SECRET_KEYS, "--secret-key") != 0)
            return -1;
        if (cfg->n_secret_keys == before)
            goto bad; /* no key in it: an empty value would silently mean "any test_sk_" */
        return 0;
    }
    case O_WEBHOOK_URL: {
        bool replaces = strcmp(src, "flag") == 0 && !c->urls_from_flags;
        size_t before = replaces ? 0 : cfg->n_webhook_urls;
        if (append_list(c, val, src, &c->urls_from_flags, c->webhook_urls, &cfg->n_webhook_urls,
                        WEBHOOK_MAX_RECEIVERS, "--webhook-url") != 0)
            return -1;
        char err[ERR_LEN];
        for (size_t i = before; i < cfg->n_webhook_urls; i++)
            if (webhook_url_check(c->webhook_urls[i], err) != 0) {
                fprintf(stderr, "fakegate: --webhook-url: %s\n", err);
                return -1;
            }
        if (cfg->n_webhook_urls == before)
            goto bad;
        return 0;
    }
    case O_WEBHOOK_MAX_PENDING:
        if (!parse_u64(val, UINT32_MAX, &v) || v == 0)
            goto bad;
        cfg->webhook_max_pending = (size_t)v;
        return 0;
    case O_MAX_TENANTS:
        if (!parse_u64(val, 1000000, &v) || v == 0)
            goto bad;
        cfg->max_tenants = (size_t)v;
        return 0;
    case O_JOURNAL_SIZE:
        if (!parse_u64(val, JOURNAL_SIZE_MAX, &v) || v == 0)
            goto bad;
        cfg->journal_size = (size_t)v;
        return 0;
    case O_CLUSTER_JOURNAL_MAX:
        if (!parse_u64(val, CLUSTER_JOURNAL_MAX_MAX, &v) || v == 0)
            goto bad;
        cfg->cluster_journal_max = (size_t)v;
        return 0;
    case O_MID:
        if (val[0] == '\0')
            goto bad;
        cfg->mid = val;
        return 0;
    case O_ADMIN_TOKEN: cfg->admin_token = val; return 0;
    case O_STATE_FILE:
        if (!*val)
            goto bad;
        cfg->state_file = val;
        return 0;
    case O_STORE: {
        if (strcmp(val, "memory") == 0) {
            cfg->store_url = NULL;
            return 0;
        }
        struct cluster_url u;
        char err[ERR_LEN];
        if (cluster_parse_url(val, &u, err) != 0) {
            bool flag = strcmp(src, "flag") == 0;
            fprintf(stderr, "fakegate: %s%s%s\n", flag ? "" : src, flag ? "" : ": ", err);
            return -1;
        }
        cfg->store_url = val;
        return 0;
    }
    case O_STATE_FSYNC:
        if (strcmp(val, "never") != 0 && strcmp(val, "always") != 0)
            goto bad;
        cfg->state_fsync_always = strcmp(val, "always") == 0;
        return 0;
    case O_LOG:
        if (strcmp(val, "text") != 0 && strcmp(val, "json") != 0)
            goto bad;
        cfg->log_json = strcmp(val, "json") == 0;
        return 0;
    case O_THREADS:
        if (!parse_u64(val, 64, &v) || v == 0)
            goto bad;
        cfg->threads = (unsigned)v;
        return 0;
    case O_MAX_CONNECTIONS:
        if (!parse_u64(val, 1048576, &v) || v == 0)
            goto bad;
        cfg->max_connections = (unsigned)v;
        return 0;
    case O_MAX_BODY:
        if (!parse_u64(val, 1U << 30, &v) || v == 0)
            goto bad;
        cfg->max_body = (size_t)v;
        return 0;
    case O_MAX_JSON_DEPTH:
        if (!parse_u64(val, BODY_MAX_JSON_DEPTH_MAX, &v) || v == 0)
            goto bad;
        cfg->max_json_depth = (size_t)v;
        return 0;
    case O_IDEMPOTENCY_TTL:
        if (!parse_u64(val, INT64_MAX / NS_PER_S, &v) || v == 0)
            goto bad;
        cfg->idempotency_ttl_s = (int64_t)v;
        return 0;
    case O_MAX_IDEMPOTENCY_RECORDS:
        if (!parse_u64(val, UINT32_MAX, &v) || v == 0)
            goto bad;
        cfg->max_idempotency_records = (size_t)v;
        return 0;
    case O_MAX_PAYMENTS:
        if (!parse_u64(val, UINT32_MAX, &v) || v == 0)
            goto bad;
        cfg->max_payments = (size_t)v;
        return 0;
    case O_SESSION_TTL:
        if (!parse_u64(val, INT64_MAX / NS_PER_S, &v) || v == 0)
            goto bad;
        cfg->session_ttl_s = (int64_t)v;
        return 0;
    case O_IDLE_TIMEOUT:
        if (!parse_u64(val, 86400, &v))
            goto bad;
        cfg->idle_timeout_s = (unsigned)v;
        return 0;
    case O_CONSECUTIVE_CANCEL_MS:
        if (!parse_u64(val, 86400000, &v))
            goto bad;
        cfg->consecutive_cancel_ms = (int64_t)v;
        return 0;
    case O_REPORT_MAX_IDENTITIES:
        if (!parse_u64(val, UINT32_MAX, &v) || v == 0)
            goto bad;
        cfg->report_max_identities = (size_t)v;
        return 0;
    case O_STRICT_SESSIONS:
    case O_QUIET: {
        bool on = !val || strcmp(val, "1") == 0 || strcasecmp(val, "true") == 0 ||
                  strcasecmp(val, "yes") == 0;
        if (val && !on && strcmp(val, "0") != 0 && strcasecmp(val, "false") != 0 &&
            strcasecmp(val, "no") != 0)
            goto bad;
        if (id == O_QUIET)
            cfg->quiet = on;
        else
            cfg->strict_sessions = on;
        return 0;
    }
    case O_CHECK_PROFILE: c->check_profile = val; return 0;
    case O_VERSION:
    case O_HELP:
    case O_COUNT:
        break;
    }
    return 0;
bad:;
    /* Quoted only when it would not read as one word. */
    bool quote = val[0] == '\0' || strpbrk(val, " \t'") != NULL;
    const char *q = quote ? "'" : "";
    if (strcmp(src, "flag") == 0)
        fprintf(stderr, "fakegate: --%s %s%s%s: %s\n", opts[id].name, q, val, q, accepted(id));
    else
        fprintf(stderr, "fakegate: %s=%s%s%s (for --%s): %s\n", src, q, val, q, opts[id].name,
                accepted(id));
    return -1;
}

/* Defaults, then FAKEGATE_* variables, then flags. Returns 0, 1 (help/version printed: exit 0)
 * or -1 (usage error printed: exit 2). */
static int parse_cli(struct cli *c, int argc, char **argv)
{
    struct config *cfg = &c->cfg;
    memset(c, 0, sizeof *c);
    cfg->host = "127.0.0.1";
    cfg->port = 8080;
    cfg->profile = "normal";
    cfg->mid = "tgen_fakegate";
    cfg->threads = 2;
    cfg->max_body = 65536;
    cfg->idempotency_ttl_s = 15 * 86400;
    cfg->session_ttl_s = 600;
    cfg->idle_timeout_s = 30;
    cfg->consecutive_cancel_ms = 1000;
    cfg->secret_keys = c->secret_keys;
    cfg->webhook_urls = c->webhook_urls;
    for (int i = 0; i < O_COUNT; i++) {
        if (!opts[i].env)
            continue;
        char env[64] = "FAKEGATE_";
        size_t k = strlen(env);
        for (const char *p = opts[i].name; *p; p++)
            env[k++] = *p == '-' ? '_' : (char)(*p - ('a' <= *p && *p <= 'z' ? 32 : 0));
        env[k] = '\0';
        const char *v = getenv(env);
        if (v && apply(c, i, v, env) != 0)
            return -1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0)
            a = "--help";
        else if (strcmp(a, "-V") == 0)
            a = "--version";
        if (a[0] == '-' && a[1] != '-' && a[1] != '\0') {
            unknown_option(a, strcspn(a, "="), 1);
            return -1;
        }
        if (strncmp(a, "--", 2) != 0) {
            /* A misspelt subcommand ("prob") is the likely mistake when it comes first. */
            const char *hint = i == 1 ? jsonpos_suggest(a, subcmd_names) : NULL;
            fprintf(stderr, "fakegate: unexpected argument '%s'%s%s%s\n", a,
                    hint ? "; did you mean fakegate " : "", hint ? hint : "",
                    hint ? "?" : " (see --help)");
            return -1;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        int id = find_opt(name, len);
        if (id < 0) {
            unknown_option(a, len + 2, 2);
            return -1;
        }
        if (id == O_HELP) {
            usage(stdout);
            return 1;
        }
        if (id == O_VERSION) {
            printf("fakegate %s\n", FAKEGATE_VERSION);
            return 1;
        }
        const char *val = NULL;
        if (opts[id].arg) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else {
                fprintf(stderr, "fakegate: --%s needs a value (%s)\n", opts[id].name, opts[id].arg);
                return -1;
            }
        } else if (eq) {
            val = eq + 1;
        }
        if (apply(c, id, val, "flag") != 0)
            return -1;
    }
    if (cfg->store_url && cfg->state_file) {
        fprintf(stderr, "fakegate: --store %s with --state-file %s: choose one (the shared store "
                        "keeps the state then; docs/cluster.md)\n", cfg->store_url, cfg->state_file);
        return -1;
    }
    if (cfg->cluster_journal_max && !cfg->store_url) {
        fprintf(stderr, "fakegate: --cluster-journal-max %zu: only with --store redis://HOST:PORT "
                        "(the in-memory journal's size is --journal-size; docs/cluster.md)\n",
                cfg->cluster_journal_max);
        return -1;
    }
    return 0;
}

/* --- port file ---------------------------------------------------------------------------- */

static int write_port_file(const char *path, unsigned port)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* --- main --------------------------------------------------------------------------------- */

static void *second_signal(void *arg)
{
    sigset_t *set = arg;
    int sig;
    sigwait(set, &sig);
    fprintf(stderr, "fakegate: second signal (%s): exiting now\n", strsignal(sig));
    _exit(1);
}

static int run(struct cli *cli, int argc, char **argv);

static void cli_free(struct cli *c)
{
    for (size_t i = 0; i < c->n_copies; i++)
        free(c->copies[i]);
    c->n_copies = 0;
}

/* True if every address `host` resolves to is a loopback one (127.0.0.0/8, ::1): only this
 * machine can reach the server. */
static bool host_is_loopback(const char *host)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, NULL, &hints, &ai) != 0)
        return false;
    bool all = ai != NULL;
    for (struct addrinfo *p = ai; p; p = p->ai_next) {
        if (p->ai_family == AF_INET) {
            const struct sockaddr_in *v4 = (const struct sockaddr_in *)p->ai_addr;
            all = all && (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
        } else if (p->ai_family == AF_INET6) {
            const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)p->ai_addr;
            all = all && IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
        } else {
            all = false;
        }
    }
    freeaddrinfo(ai);
    return all;
}

/* --host beyond loopback: say, even with --quiet, who can now do what (docs/cli.md §1). */
static void warn_exposed(const struct config *cfg)
{
    if (cfg->admin_token)
        fprintf(stderr, "fakegate: warning: --host %s is not loopback: other machines can reach "
                        "the payment API and /metrics; /__admin/ needs the --admin-token\n",
                cfg->host);
    else
        fprintf(stderr, "fakegate: warning: --host %s is not loopback: any machine that reaches "
                        "this port can read the ledger, the request journal and the report, "
                        "switch the profile, move the gateway clock and reset everything through "
                        "/__admin/ (no --admin-token is set)\n",
                cfg->host);
}

/* --state-file: open it, replay it into the gateway and say what came back (docs/state-file.md).
 * 0, or -1 with the message printed (PATH:LINE: ... for a record that does not fit). */
static int open_state(struct gateway *g, const struct config *cfg, struct statefile **out)
{
    char err[ERR_LEN];
    int64_t t0 = now_mono_ns();
    struct statefile *sf = statefile_open(cfg->state_file, cfg->state_fsync_always
                                                               ? STATEFILE_SYNC_ALWAYS
                                                               : STATEFILE_SYNC_NEVER, err);
    struct statefile_stats st;
    if (sf)
        gateway_attach_state(g, sf);
    if (!sf || statefile_replay(sf, g, &st, err) != 0) {
        fprintf(stderr, "fakegate: %s\n", err);
        gateway_attach_state(g, NULL);
        statefile_free(sf);
        return -1;
    }
    /* A crash mid-write is worth a line even with --quiet: the change it held is gone. */
    if (st.torn_bytes)
        fprintf(stderr, "fakegate: --state-file %s: dropped an incomplete last line (%zu bytes: "
                        "a crash while it was written; its request got no answer)\n",
                cfg->state_file, st.torn_bytes);
    if (!cfg->quiet)
        fprintf(stderr, "fakegate: --state-file %s: replayed %llu lines (%llu records) in %.1f "
                        "ms: %zu payments, %zu Idempotency-Key records, %zu released (PROCESSING "
                        "when the last run ended), gateway clock +%.3f s\n",
                cfg->state_file, (unsigned long long)st.lines, (unsigned long long)st.records,
                (double)(now_mono_ns() - t0) / 1e6, st.payments, st.idem_records, st.released,
                (double)st.clock_offset_us / 1e6);
    *out = sf;
    return 0;
}

/* --store redis://: connect, replay the shared log into the gateway (docs/cluster.md), and
 * attach the shared state log. 0, or -1 with the message printed. */
static int open_store(struct gateway *g, const struct config *cfg, struct statefile **sf_out,
                      struct cluster **out)
{
    char err[ERR_LEN];
    struct cluster_url u;
    if (cluster_parse_url(cfg->store_url, &u, err) != 0) { /* checked by parse_cli */
        fprintf(stderr, "fakegate: %s\n", err);
        return -1;
    }
    int64_t t0 = now_mono_ns();
    struct cluster *c = cluster_new(&u, g->instance_id, cfg->idempotency_ttl_s * 1000);
    char name[sizeof u.text + 8];
    snprintf(name, sizeof name, "%s log", u.text);
    struct statefile *sf = c ? statefile_new_shared(name, c) : NULL;
    if (!sf) {
        fprintf(stderr, "fakegate: out of memory\n");
        cluster_free(c);
        return -1;
    }
    gateway_attach_state(g, sf);
    g->cluster = c;
    uint64_t lines = 0;
    if (cluster_start(c, sf, g, &lines, err) != 0) {
        fprintf(stderr, "fakegate: %s\n", err);
        g->cluster = NULL;
        gateway_attach_state(g, NULL);
        statefile_free(sf);
        cluster_free(c);
        return -1;
    }
    size_t jmax = cfg->cluster_journal_max ? cfg->cluster_journal_max
                                           : CLUSTER_JOURNAL_MAX_DEFAULT;
    g->cjournal = cluster_journal_start(&u, g->instance_id, jmax, err);
    /* The profile in force, its budgets, buckets and caps: the cluster's (cluster_limits.h). */
    struct cluster_limits *l = g->cjournal ? cluster_limits_new(c, g) : NULL;
    if (!g->cjournal || !l || cluster_limits_start(l, err) != 0) {
        fprintf(stderr, "fakegate: %s\n", !g->cjournal || l ? err : "out of memory");
        cluster_limits_free(l);
        cluster_journal_stop(g->cjournal);
        g->cjournal = NULL;
        g->cluster = NULL;
        gateway_attach_state(g, NULL);
        statefile_free(sf);
        cluster_free(c);
        return -1;
    }
    g->limits = l;
    if (!cfg->quiet)
        fprintf(stderr, "fakegate: --store %s: instance %016llx, replayed %llu lines of the shared "
                        "log in %.1f ms\n", u.text, (unsigned long long)g->instance_id,
                (unsigned long long)lines, (double)(now_mono_ns() - t0) / 1e6);
    *sf_out = sf;
    *out = c;
    return 0;
}

int main(int argc, char **argv)
{
    subcmd_fn sub = argc >= 2 ? subcmd_find(argv[1]) : NULL;
    if (sub)
        return sub(argc, argv);
    struct cli cli;
    int pc = parse_cli(&cli, argc, argv);
    int rc = pc != 0 ? (pc > 0 ? 0 : 2) : run(&cli, argc, argv);
    cli_free(&cli);
    return rc;
}

static int run(struct cli *clip, int argc, char **argv)
{
    (void)argc;
    struct cli cli = *clip;
    struct config *cfg = &cli.cfg;
    cfg->secret_keys = cli.secret_keys;
    cfg->webhook_urls = cli.webhook_urls;
    char err[ERR_LEN];
    struct profile *profile = NULL;
    struct profile_search search;
    profile_search_init(&search, cfg->profiles_dir, argv[0]);
    if (cli.check_profile) {
        char subject[PATH_MAX];
        snprintf(subject, sizeof subject, "--check-profile %s", cli.check_profile);
        if (profile_find_load(&search, cli.check_profile, subject, &profile, err) != 0) {
            fprintf(stderr, "fakegate: %s\n", err);
            return 2;
        }
        printf("%s: ok (profile %s%s)\n", cli.check_profile, profile->name,
               profile->file ? "" : ", built in");
        profile_free(profile);
        return 0;
    }
    char subject[PATH_MAX];
    snprintf(subject, sizeof subject, "--profile %s", cfg->profile);
    if (profile_find_load(&search, cfg->profile, subject, &profile, err) != 0) {
        fprintf(stderr, "fakegate: %s\n", err);
        return 2;
    }

    /* Signals go to sigwait below; no other thread may take them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    uint64_t rnd[2] = {0, 0};
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        rnd[0] = (uint64_t)now_unix_us() ^ ((uint64_t)getpid() << 32), rnd[1] = ~rnd[0];
    uint64_t seed = cfg->has_seed ? cfg->seed : profile->has_seed ? profile->seed : rnd[0] >> 1;

    /* From here every exit, a failed start too (a port in use, say), undoes what was started
     * in reverse order: the gateway holds the journal's ring, the profile and the tenants. */
    struct gateway gw;
    if (gateway_init(&gw, cfg, profile_find_resolver, &search, profile, seed, rnd[1]) != 0) {
        fprintf(stderr, "fakegate: out of memory\n");
        return 1;
    }
    struct statefile *sf = NULL;
    struct cluster *cl = NULL;
    if (observe_init(&gw) != 0) {
        fprintf(stderr, "fakegate: out of memory\n");
        goto fail_gateway;
    }
    if (cfg->state_file && open_state(&gw, cfg, &sf) != 0) {
        gateway_fini(&gw);
        return 2; /* a state file that cannot be read back is a usage error, as a profile's */
    }
    if (cfg->store_url && open_store(&gw, cfg, &sf, &cl) != 0) {
        gateway_fini(&gw);
        return 1; /* a store that cannot be reached is a runtime failure */
    }
    struct webhooks *wh = webhooks_start(&gw, cfg->webhook_urls, cfg->n_webhook_urls,
                                         cfg->webhook_max_pending, cfg->quiet, err);
    if (!wh) {
        fprintf(stderr, "fakegate: %s\n", err);
        goto fail_gateway;
    }
    struct sched sched;
    if (sched_start(&sched, err, sizeof err) != 0) {
        fprintf(stderr, "fakegate: %s\n", err);
        goto fail_webhooks;
    }
    struct http_server *h = http_start(cfg, &sched, &gw, rnd[1], err, sizeof err);
    if (!h) {
        fprintf(stderr, "fakegate: %s\n", err);
        sched_drain(&sched);
        goto fail_sched;
    }
    unsigned port = http_port(h);
    if (cfg->port_file && write_port_file(cfg->port_file, port) != 0) {
        fprintf(stderr, "fakegate: --port-file %s: %s\n", cfg->port_file, strerror(errno));
        http_stop(h, 0);
        goto fail_sched;
    }
    unsigned conns = http_connection_limit(h);
    if (cfg->max_connections > conns) /* a warning: what was asked for is not in force */
        fprintf(stderr, "fakegate: warning: --max-connections %u is more than the open-files "
                        "limit allows; connection limit %u\n", cfg->max_connections, conns);
    else if (!cfg->quiet)
        fprintf(stderr, "fakegate: connection limit %u (%s)\n", conns,
                cfg->max_connections ? "--max-connections" : "from the open-files limit");
    if (!host_is_loopback(cfg->host))
        warn_exposed(cfg);
    const char *shown = cfg->host;
    printf("fakegate listening on http://%s%s%s:%u profile=%s seed=%llu\n",
           strchr(shown, ':') ? "[" : "", shown, strchr(shown, ':') ? "]" : "", port,
           profile->name, (unsigned long long)seed);
    fflush(stdout);

    int sig = 0;
    for (;;) {
        sigwait(&set, &sig);
        if (sig != SIGHUP)
            break;
        /* SIGHUP: reload the file of the profile in force (the start profile, or the one last
         * PUT or reset by name); a profile that fails validation is rejected and the one in
         * force stays (docs/cli.md §1). A profile given inline has no file: it stays. */
        char in_force[PROFILE_NAME_MAX + 1];
        char *file = gateway_profile_file(&gw, in_force);
        if (!file) {
            fprintf(stderr, "fakegate: SIGHUP: profile %s has no file to reload (built in, or "
                            "applied inline); keeping it\n", in_force);
            continue;
        }
        struct profile *np = NULL;
        if (profile_load_file(file, profile_find_resolver, &search, &np, err) != 0) {
            fprintf(stderr, "fakegate: SIGHUP: %s; keeping the profile in force\n", err);
            free(file);
            continue;
        }
        char shown_name[PROFILE_NAME_MAX + 1];
        snprintf(shown_name, sizeof shown_name, "%s", np->name);
        if (gateway_apply(&gw, np) == 0) {
            if (!cfg->quiet)
                fprintf(stderr, "fakegate: SIGHUP: reloaded %s (profile %s)\n", file, shown_name);
        } else
            fprintf(stderr, "fakegate: SIGHUP: out of memory; keeping the profile in force\n");
        free(file);
    }
    pthread_t t;
    pthread_create(&t, NULL, second_signal, &set);
    if (!cfg->quiet)
        fprintf(stderr, "fakegate: %s: stopping\n", strsignal(sig));
    http_stop(h, 1500);
    sched_fini(&sched);
    webhooks_stop(wh);
    cluster_journal_stop(gw.cjournal); /* after the last request ended: its entry is queued */
    gw.cjournal = NULL;
    if (cfg->port_file)
        unlink(cfg->port_file);
    gateway_fini(&gw);
    bool lost = sf && atomic_load(&sf->failed);
    statefile_free(sf);
    cluster_limits_free(gw.limits);
    cluster_free(cl);
    return lost ? 1 : 0;

fail_sched:
    sched_fini(&sched);
fail_webhooks:
    webhooks_stop(wh);
fail_gateway:
    cluster_journal_stop(gw.cjournal);
    gw.cjournal = NULL;
    gateway_fini(&gw);
    statefile_free(sf);
    cluster_limits_free(gw.limits);
    cluster_free(cl);
    return 1;
}
