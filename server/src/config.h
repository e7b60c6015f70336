/* config.h -- the server's settings after argv and the environment are read (docs/cli.md §1).
 * Filled once by main.c before any thread starts; read-only afterwards. */
#ifndef FAKEGATE_CONFIG_H
#define FAKEGATE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config {
    const char *host;           /* --host, default 127.0.0.1 */
    unsigned port;              /* --port, default 8080; 0 = pick a free port */
    const char *port_file;      /* --port-file, or NULL */
    const char *profile;        /* --profile NAME|PATH, default "normal" */
    const char *profiles_dir;   /* --profiles-dir, or NULL = search the default places */
    bool has_seed;
    uint64_t seed;              /* --seed */
    const char **secret_keys;   /* --secret-key (repeatable); none = any test_sk_ / test_gsk_ */
    size_t n_secret_keys;
    const char *mid;            /* --mid, default "tgen_fakegate" */
    unsigned threads;           /* --threads, libmicrohttpd worker threads, 1-64, default 2 */
    size_t max_body;            /* --max-body, bytes, default 65536 */
    int64_t idempotency_ttl_s;  /* --idempotency-ttl, seconds, default 15 days */
    int64_t session_ttl_s;      /* --session-ttl, seconds, default 600 */
    bool strict_sessions;       /* --strict-sessions */
    unsigned idle_timeout_s;    /* --idle-timeout, seconds, default 30 */
    int64_t consecutive_cancel_ms; /* --consecutive-cancel-ms, default 1000 (Toss); 0 = off */
    bool quiet;                 /* --quiet: no access log */
    bool log_json;              /* --log json (default text) */
    const char *admin_token;    /* --admin-token: Bearer token for /__admin (NULL: open) */
    const char **webhook_urls;  /* --webhook-url (repeatable), checked http:// URLs */
    size_t n_webhook_urls;
    size_t webhook_max_pending; /* --webhook-max-pending (0 = WEBHOOK_MAX_PENDING_DEFAULT) */
    size_t max_tenants;         /* --max-tenants (0 = GATEWAY_MAX_TENANTS_DEFAULT, 10 000) */
    size_t max_idempotency_records; /* --max-idempotency-records, per tenant
                                       (0 = GATEWAY_MAX_IDEM_RECORDS_DEFAULT) */
    size_t max_payments;        /* --max-payments, per tenant (0 = GATEWAY_MAX_PAYMENTS_DEFAULT) */
    const char *state_file;     /* --state-file PATH, or NULL: state dies with the process */
    bool state_fsync_always;    /* --state-fsync always (default never) */
    const char *store_url;      /* --store redis://HOST:PORT[/DB], checked; NULL: memory (the
                                   default), state in this process only */
    size_t journal_size;        /* --journal-size, entries (0 = JOURNAL_SIZE_DEFAULT, 10 000) */
    size_t cluster_journal_max; /* --cluster-journal-max, entries of the shared journal (0 =
                                   CLUSTER_JOURNAL_MAX_DEFAULT, 200 000) */
    unsigned max_connections;   /* --max-connections (0 = from the open-files limit) */
    size_t max_json_depth;      /* --max-json-depth, request bodies (0 = BODY_MAX_JSON_DEPTH_DEFAULT, 32) */
    size_t report_max_identities; /* --report-max-identities: the report's bound on identities
                                     (0 = REPORT_MAX_IDENTITIES_DEFAULT, 1 000 000) */
};

#endif
