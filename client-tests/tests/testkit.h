/* testkit.h -- the helpers the black-box Check suites (client-tests/tests/check_*.c) share:
 * starting and stopping a server, asserting on responses (with the caller's line number through
 * the *_at(__LINE__) macros), reading the ledger and orders, strict JSON accessors, and the
 * process set-up hook of the shared main (testkit.c); for the control-plane suites
 * (check_admin_*.c) admin calls, the journal, a multi loop of held requests, reset
 * (testkit_admin.c) and a strict Prometheus text parser (testkit_prom.c); for the cluster suite
 * a redis-server, instances on it and nginx in front (testkit_cluster.c). Everything here may
 * fail the current Check test (ck_assert), so it is linked into the check_* binaries only, never
 * into the experiments runner (see the Makefile). */
#ifndef FAKEGATE_TESTKIT_H
#define FAKEGATE_TESTKIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <check.h>

#include "harness.h"

#define CONFIRM_PATH "/v1/payments/confirm"
#define MS (1000000LL) /* ns per ms */

/* --- servers ------------------------------------------------------------------------------- */

/* fg_start, failing the test (with the harness's message) if the server does not come up. */
fg_server *start_server(const fg_opts *o);
/* Start with this profile JSON (NULL: the harness's instant profile) and these extra arguments
 * (NULL-terminated, may be NULL). */
fg_server *start_args(const char *profile_json, const char *const *args);
fg_server *start_with_profile(const char *profile_json);

/* Profiles are written with ' for " to stay readable; this makes the JSON. Caller frees. */
char *dq(const char *s);
/* $FAKEGATE_PROFILES, or "profiles". */
const char *profiles_dir(void);
/* The arguments "--profiles-dir <profiles_dir()>", NULL-terminated (block-scope compound
 * literal: valid until the end of the enclosing block). */
#define PROFILES_DIR_ARGS ((const char *const[]){"--profiles-dir", profiles_dir(), NULL})

/* Start with a profile given in '-quoted JSON, and these extra arguments (may be NULL). */
fg_server *start_q_args(const char *squoted, const char *const *args);
fg_server *start_q(const char *squoted);
/* Start with a profile named `name` whose confirm route is `confirm` ('-quoted object) and
 * everything else instant, with these extra arguments (may be NULL). */
fg_server *start_confirm_as(const char *name, const char *confirm, const char *const *args);

/* SIGTERM and require exit status 0 (showing the server's stderr otherwise). Keeps `s`. */
void assert_clean_stop(fg_server *s);
/* assert_clean_stop, then fg_free. */
void stop_server(fg_server *s);

/* --- responses ----------------------------------------------------------------------------- */

#define assert_status(r, status) assert_status_at(__LINE__, (r), (status))
#define assert_error(r, status, code) assert_error_at(__LINE__, (r), (status), (code), NULL)
#define assert_error2(r, status, code, alt) assert_error_at(__LINE__, (r), (status), (code), (alt))
#define assert_curl(r, code) assert_curl_at(__LINE__, (r), (code))
#define assert_done(r, pk, oid) assert_done_at(__LINE__, (r), (pk), (oid))
#define assert_done_amount(r, pk, oid, amount) \
    assert_done_amount_at(__LINE__, (r), (pk), (oid), (amount))

/* An HTTP response with this status. */
void assert_status_at(int line, const fg_response *r, long status);
/* A Toss error {code, message}: this status, this code (or `alt` unless NULL), a non-empty
 * message and a JSON Content-Type. */
void assert_error_at(int line, const fg_response *r, long status, const char *code,
                     const char *alt);
/* No HTTP response but this curl error (CURLE_OK: any response). */
void assert_curl_at(int line, const fg_response *r, CURLcode code);
/* A 200 DONE Payment for this paymentKey and orderId (and amount: totalAmount, balanceAmount). */
void assert_done_at(int line, const fg_response *r, const char *pk, const char *oid);
void assert_done_amount_at(int line, const fg_response *r, const char *pk, const char *oid,
                           long long amount);

/* The two bodies are byte for byte the same. */
bool same_bytes(const fg_response *a, const fg_response *b);

/* --- JSON and text ------------------------------------------------------------------------- */

/* Member `key` of `obj`, failing the test unless it is a JSON integer / a string (borrowed). */
long long json_int(const json_t *obj, const char *key);
const char *json_str(const json_t *obj, const char *key);

/* `s` (not NULL) matches the extended regular expression `re`. */
bool matches(const char *re, const char *s);

/* 1-based line and byte column of the first `needle` in `text` (which must contain it). */
void line_col_of(const char *text, const char *needle, int *line, int *col);

/* --- confirms, orders and the ledger ------------------------------------------------------- */

/* A syntactically valid confirm body (amount 1000) of exactly `size` bytes. Caller frees. */
char *padded_body(const char *pk, const char *oid, size_t size);

/* POST /v1/payments/confirm on a fresh connection that is closed afterwards, with the server's
 * auth, `extra` header line ("Name: value"; NULL: none) and Idempotency-Key `key` (NULL: none).
 * timeout_ms 0: the harness default. Same returns as fg_http. */
int confirm_with(const fg_server *s, const char *pk, const char *oid, long long amount,
                 const char *key, const char *extra, long timeout_ms, fg_response *r);
/* confirm_with without an extra header. */
int confirm_fresh(const fg_server *s, const char *pk, const char *oid, long long amount,
                  const char *key, long timeout_ms, fg_response *r);

/* confirm_fresh with secret key `secret_key` instead of the server's: a tenant of its own
 * (docs/tenants.md §9). */
int confirm_as_key(const fg_server *s, const char *secret_key, const char *pk, const char *oid,
                   long long amount, const char *key, long timeout_ms, fg_response *r);

/* GET /v1/payments/orders/{oid} into *r (caller finis it). */
void get_order(const fg_server *s, const char *oid, fg_response *r);
/* The order's status now (copied into buf; "" unless it answers 200 with a status). */
void order_status(const fg_server *s, const char *oid, char *buf, size_t n);
/* GET the order, require 200; copy its status into `status` and, unless `ltk` is NULL, its
 * lastTransactionKey ("" if none) into `ltk`. */
void order_read(const fg_server *s, const char *oid, char *status, size_t n, char *ltk,
                size_t ln);
#define assert_order_status(s, oid, want) assert_order_status_at(__LINE__, (s), (oid), (want))
void assert_order_status_at(int line, const fg_server *s, const char *oid, const char *want);
/* Poll the order every poll_ms, at most timeout_ms, until it reads `status`. Returns the
 * CLOCK_MONOTONIC ns at which the read that saw it was sent, or 0 on timeout. */
int64_t wait_for_order_status(const fg_server *s, const char *oid, const char *status,
                              int timeout_ms, long poll_ms);

/* The only ledger entry for `oid`, asserting there is exactly one. New reference. */
#define the_ledger_entry(s, oid) the_ledger_entry_at(__LINE__, (s), (oid))
json_t *the_ledger_entry_at(int line, const fg_server *s, const char *oid);
/* Its charges. */
#define ledger_charges(s, oid) ledger_charges_at(__LINE__, (s), (oid))
long long ledger_charges_at(int line, const fg_server *s, const char *oid);
/* It is charged once, DONE, with this paymentKey. */
#define assert_charged_once(s, pk, oid) assert_charged_once_at(__LINE__, (s), (pk), (oid))
void assert_charged_once_at(int line, const fg_server *s, const char *pk, const char *oid);
/* How many entries the ledger holds. */
size_t ledger_size(const fg_server *s);

/* --- the admin API (testkit_admin.c; used by the check_admin_*.c suites) ------------------ */

/* Start with a profile named "admin" whose confirm route is `confirm` ('-quoted object) and
 * everything else instant, with --profiles-dir so that names resolve. */
fg_server *start_admin_confirm(const char *confirm);
/* A request to an admin route (no auth), with an optional body and an optional extra header
 * line. Same returns as fg_http. */
int admin_call(const fg_server *s, const char *method, const char *path, const char *body,
               const char *header, fg_response *r);
/* PUT /__admin/profile with this body into *r (caller finis it). */
void put_profile(const fg_server *s, const char *json, fg_response *r);
/* GET path (no auth), require 200 JSON; a new reference to the parsed body. */
json_t *admin_json(const fg_server *s, const char *path);
/* The journal (GET /__admin/requests[?limit=N], limit <= 0: no limit), newest last: a new
 * reference to its "requests" array. */
json_t *journal(const fg_server *s, int limit);
/* Wait (at most 5 s, polling the journal) until no journal entry is pending: every request sent
 * so far has ended on the server. The report pairs an answer with the first arrival after that
 * answer ended, so a test resends only then. */
void wait_journal_settled(const fg_server *s);
/* The journal as text, for failure messages. Caller frees. */
char *journal_text(const fg_server *s);
/* Member `key` of `o` is the string `want` (false if absent or not a string). */
bool json_is_str(const json_t *o, const char *key, const char *want);
/* How many confirm entries of `entries` have an order_id starting with `prefix` and a null
 * status (pending). */
size_t count_pending(const json_t *entries, const char *prefix);
/* Poll the journal until `want` confirms with order_id prefix `prefix` are pending, at most
 * timeout_ms. Returns the last count seen. */
size_t wait_pending(const fg_server *s, const char *prefix, size_t want, int timeout_ms);
/* The last entry of `entries` with this order_id (borrowed), or NULL. */
json_t *entry_for(const json_t *entries, const char *order_id);
/* Member `key` of `o`, failing the test unless it is a JSON number. */
double jnum(const json_t *o, const char *key);
/* The active profile is `name` and, unless profile_json is NULL, its "profile" equals that
 * JSON (GET /__admin/profile). */
void assert_profile_is(const fg_server *s, const char *name, const char *profile_json);
/* POST /__admin/reset without a body; require 200. */
void reset_now(const fg_server *s);

/* A libcurl multi loop: many confirms at once, one connection each, closed afterwards, run to
 * their end on this thread (mrun_perform) or on a background thread (mrun_start, mrun_join).
 * Each request records when it ended, its place in completion_seq and its Retry-After. */
struct mreq {
    CURL *h;
    struct curl_slist *hdrs;
    char body[256];
    char pk[64], oid[80], key[80];
    char *out;
    size_t out_len, out_cap;
    char retry_after[64];
    char errbuf[CURL_ERROR_SIZE];
    long status;
    CURLcode code;
    int64_t total_us;
    int64_t done_ns;
    long seq;
};

struct mrun {
    const fg_server *s;
    struct mreq *q;
    size_t n;
    atomic_size_t n_done;
    int64_t started_ns;
    pthread_t thread;
    bool threaded;
};

/* The global order of completions (multi loops, and a test's own calls that take a number). */
extern atomic_long completion_seq;
/* Room for n requests against s. */
void mrun_init(struct mrun *m, const fg_server *s, size_t n);
/* Request i: a confirm of (pk, oid, amount) with Idempotency-Key `key` (NULL: none). */
void mrun_confirm(struct mrun *m, size_t i, const char *pk, const char *oid, long long amount,
                  const char *key, long timeout_ms);
/* Run every request to its end in one multi loop on this thread. */
void mrun_perform(struct mrun *m);
/* mrun_perform on a new thread; mrun_join waits for it (a no-op if none runs). */
void mrun_start(struct mrun *m);
void mrun_join(struct mrun *m);
/* mrun_join, then free everything. */
void mrun_free(struct mrun *m);

/* --- /metrics (testkit_prom.c): a small strict Prometheus text parser ---------------------- */

#define PROM_MAX_LABELS 4

struct prom_sample {
    char name[96];
    size_t n_labels;
    char lname[PROM_MAX_LABELS][32];
    char lvalue[PROM_MAX_LABELS][64];
    double value;
};

struct prom_family {
    char name[96];
    char type[16];
    int n_help, n_type;
    bool closed; /* another family's lines came after its own */
};

struct prom {
    struct prom_sample *s;
    size_t n;
    struct prom_family f[64];
    size_t nf;
};

/* Parse `text` into *p (prom_free it either way): every family has exactly one HELP and one
 * TYPE before its samples and its lines are contiguous, label values are escaped, no series is
 * repeated, counters are not negative. False with a message in err. */
bool prom_parse(const char *text, struct prom *p, char *err, size_t errlen);
void prom_free(struct prom *p);
/* The family `name` (exact name), or NULL. */
struct prom_family *prom_family_get(struct prom *p, const char *name);
/* The value of label `name` of the sample, or NULL. */
const char *prom_label(const struct prom_sample *s, const char *name);
/* The value of series `name` with exactly the labels given as (name, value) pairs, NULL-ended;
 * NAN if absent. */
double prom_get(const struct prom *p, const char *name, ...);
/* GET /metrics (no auth) and parse it; the test fails if it is not valid Prometheus text. The
 * raw text is returned in *text if not NULL (caller frees). */
void metrics(const fg_server *s, struct prom *p, char **text);
/* One series' value now: `name`, with the label lk=lv (lk NULL: no label). */
double metric1(const fg_server *s, const char *name, const char *lk, const char *lv);
/* Poll until the series reaches `want`, at most timeout_ms. Returns the last value. */
double wait_metric(const fg_server *s, const char *name, const char *lk, const char *lv,
                   double want, int timeout_ms);

/* The route and outcome label values of fakegate_requests_total (docs/edge-rules.md §7). */
#define N_ROUTES 5
#define N_OUTCOMES 11
extern const char *const ROUTES[N_ROUTES];
extern const char *const OUTCOMES[N_OUTCOMES];

/* --- a cluster (testkit_cluster.c; used by check_cluster.c, `make cluster-test`) ----------- */

/* One redis-server, CLUSTER_N fakegate instances sharing it through --store, and nginx in front
 * of them, all on 127.0.0.1 and on free ports, all children of the calling thread (they die
 * with it: PR_SET_PDEATHSIG), each with its own files in one temp dir. */
#define CLUSTER_N 3

typedef struct fg_cluster {
    char dir[FG_DIR_LEN];           /* redis.log, nginx.conf, nginx-error.log, nginx temp dirs */
    pid_t redis_pid;                /* -1 once collected */
    int redis_port;
    char store_url[96];             /* "redis://127.0.0.1:PORT/0", or "" (the memory store) */
    fg_server *inst[CLUSTER_N];     /* the instances; inst[i] == NULL while i is down */
    int inst_port[CLUSTER_N];       /* each keeps its port across restarts (nginx's upstream) */
    pid_t nginx_pid;                /* -1 once collected */
    fg_server lb;                   /* nginx, as a server to send requests to (port, auth) */
} fg_cluster;

/* Start the cluster: redis-server (--save '' --appendonly no, in the temp dir), CLUSTER_N
 * instances with `--store redis://127.0.0.1:PORT/0` and `args` (NULL-terminated, may be NULL;
 * borrowed until cluster_free), and nginx (upstream round-robin over them, keepalive, HTTP/1.1,
 * proxy_next_upstream off: one client request is never sent to two instances). Ready when
 * redis answers PING, each instance its port file and /healthz, and nginx /healthz. With
 * FAKEGATE_CLUSTER_STORE=memory the instances get no --store (each its own in-memory store:
 * how the cluster suite is checked against a server without the Redis store, whose sharing
 * cases must then fail). Fails the test if anything does not come up. Caller owns the result:
 * cluster_free. Thread: the caller's (the test's main thread); every process dies with it. */
fg_cluster *cluster_start(const char *const *args);
/* SIGKILL instance i and collect it; inst[i] becomes NULL. */
void cluster_kill(fg_cluster *c, int i);
/* Start instance i again, on its old port, on the same store and with the same args. */
void cluster_restart(fg_cluster *c, int i);
/* Send `sig` to redis-server (SIGSTOP, SIGCONT). */
void cluster_signal_redis(const fg_cluster *c, int sig);
/* DBSIZE of the cluster's Redis (database 0): how many keys the instances keep there. */
long cluster_redis_dbsize(const fg_cluster *c);
/* True while process `pid` (one of the cluster's children) has not exited. */
bool cluster_alive(pid_t pid);
/* PUT /__admin/profile with this JSON on every instance; require 200 from each. */
void cluster_put_profile(const fg_cluster *c, const char *json);
/* Stop nginx, every instance (requiring a clean exit of those not killed) and redis, and
 * remove the temp dir. NULL is allowed. */
void cluster_free(fg_cluster *c);

/* --- running ------------------------------------------------------------------------------- */

/* A new test case `name` with this timeout (seconds), already added to `su`. */
TCase *add_tcase(Suite *su, const char *name, double timeout_s);
/* add_tcase for tests whose assertions bound how long the server takes in wall-clock time
 * (resends arriving within 10 ms of each other, a probe giving up within its timeout, requests
 * landing inside a 1.5 s throttle window): the case is tagged "timing", and `make memcheck`
 * excludes that tag (CK_EXCLUDE_TAGS=timing), since under valgrind the server runs 20-50 times
 * slower and such a bound says nothing. Every other build runs them. */
TCase *add_timing_tcase(Suite *su, const char *name, double timeout_s);
/* Every black-box binary runs through the shared main (server/tests/check_main.h): a suite
 * defines make_suite(). testkit.c defines the check_main_setup() hook for all of them:
 * curl_global_init(CURL_GLOBAL_DEFAULT) once, before any test forks or starts a thread that
 * uses curl. */

#endif
