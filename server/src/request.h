/* request.h -- one HTTP request as the handlers see it, free of libmicrohttpd types.
 * http.c fills the transport fields, the router and handlers fill the rest and set `resp`.
 * Ownership: every pointer here is owned by the request and freed by request_free, which only
 * http.c's completion callback calls. Threads: the libmicrohttpd worker of its connection owns
 * the request except while it is suspended in the scheduler, when only the timer thread
 * touches it. */
#ifndef FAKEGATE_REQUEST_H
#define FAKEGATE_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "journal.h"
#include "profile.h"
#include "report.h"

struct live;
struct payment_va;
struct tenant;

enum http_method { HM_GET = 0, HM_POST, HM_PUT, HM_DELETE, HM_PATCH, HM_HEAD, HM_OTHER };

/* What the handler layer asks http.c to do next. */
enum handler_result {
    H_CONTINUE, /* headers accepted: read the body */
    H_RESPOND,  /* resp is ready: send it */
    H_HOLD      /* suspend until hold_until_ns, then call router_on_deadline */
};

/* Which handler a request was routed to. */
enum route_kind {
    RK_NONE = 0,
    RK_CONFIRM,
    RK_GET_PAYMENT,
    RK_GET_ORDER,
    RK_CANCEL,
    RK_TRANSACTIONS,
    RK_VIRTUAL_ACCOUNT,
    RK_HEALTH,
    RK_ADMIN_PAYMENTS,
    RK_ADMIN_SESSIONS,
    RK_ADMIN_PROFILE,
    RK_ADMIN_RESET,
    RK_ADMIN_REQUESTS,
    RK_ADMIN_REPORT,
    RK_ADMIN_WEBHOOKS,
    RK_ADMIN_DELIVERIES,
    RK_ADMIN_RESEND,
    RK_ADMIN_CLOCK,
    RK_ADMIN_DEPOSIT,
    RK_ADMIN_UI,
    RK_ADMIN_TIMELINE,
    RK_METRICS
};

/* Where a confirm is in its life (docs/profiles.md §4 order of decisions). */
enum req_phase {
    PH_NEW = 0,     /* headers seen */
    PH_BODY,        /* reading the body */
    PH_QUEUED,      /* in queue_latency: no claim yet */
    PH_PROCESSING,  /* claimed, in latency: commits at hold_until_ns */
    PH_RESPOND,     /* resp ready */
    PH_SENT
};

/* How the response reaches the wire (docs/profiles.md §4 faults): whole, or lost in one of these
 * ways. */
enum wire {
    WIRE_NORMAL = 0,
    WIRE_CLOSE,     /* FIN, no bytes */
    WIRE_RESET,     /* RST (SO_LINGER 0), no bytes */
    WIRE_HANG,      /* held open for wire_ms, then closed, no bytes */
    WIRE_TRUNCATE,  /* status line, headers, half the body, then closed */
    WIRE_DRIP       /* headers at once, body spread over wire_ms */
};

struct response {
    int status;
    char *body;            /* owned */
    size_t body_len;
    bool close;            /* send Connection: close and close after */
    const char *allow;     /* static; for 405 */
    const char *code;      /* the error code sent (static or the profile's), or NULL */
    const char *content_type; /* static; NULL = application/json, "" = none */
    char retry_after[64];  /* Retry-After header value, or "" for none */
    uint32_t retry_after_s; /* what that value tells a client to wait, whole seconds (0: none,
                               or a raw value): the report's early_retry reads this */
    int64_t retry_after_until_ns; /* an http-date: the monotonic instant it names (0: none) */
    bool internal;         /* fakegate's own answer (a reset overtook the request, the server
                              is stopping, memory ran out): no way-out fault applies to it */
    enum wire wire;
    double wire_ms;        /* WIRE_HANG, WIRE_DRIP */
    char trace_id[33];     /* the x-tosspayments-trace-id it was sent with (http.c, at send
                              time); "" when nothing was sent */
};

/* What admission (admit.c) decided and keeps for the handlers. */
struct admit_state {
    char *secret_key;      /* owned: the accepted key (Basic auth) */
    struct tenant *tenant; /* the key's tenant (borrowed: tenants live until exit); NULL before
                              authentication */
    char *idem_key;        /* owned: the validated Idempotency-Key, or NULL */
    struct live *live;     /* the profile state in force at arrival (borrowed) */
    uint64_t seed;         /* the seed of its plan: --seed, else the seed of the profile it
                              arrived under (applied or X-Fakegate-Profile), else the start's */
    uint64_t generation;   /* the reset generation it was admitted in (gateway_txn checks it) */
    bool in_flight;        /* counted in flight from arrival to the end of its response */
    struct cluster_slot *cap_slot; /* --store redis://: its slot of a shared concurrency cap
                              (cluster_limits.h), given back with in_flight; NULL without */
    struct profile *ovr_fault_profile; /* owned: X-Fakegate-Fault parsed as a one-fault profile */
    double ovr_latency_ms; /* X-Fakegate-Latency-Ms (>= 0), or -1 for none */
};

/* What became of an answer on its TCP connection, read from the socket when the answer was
 * queued and again at completion (http.c). */
struct tcp_fate {
    bool known;            /* both readings were made */
    bool reset;            /* by completion the client's TCP had reset the connection */
    uint64_t sent_bytes;   /* bytes of this answer written to the socket, by completion ... */
    uint64_t acked_bytes;  /* ... and acknowledged by the client's TCP */
};

/* What observation (observe.c) records of the request, written by whichever module learns it. */
struct observe_state {
    bool journaled;        /* a gateway request: journaled and counted in metrics */
    uint64_t journal_id;
    enum outcome outcome;  /* exactly one per request (docs/admin.md §5) */
    bool key_reuse;        /* its Idempotency-Key came with a different body (payments.c) */
    bool committed;        /* it changed the ledger (the store's event for it, observe.c) */
    bool planned;          /* latencies were drawn (for the histogram) */
    bool latency_spent;    /* it went on into its processing latency (not a 409, replay, drop
                              or early error) */
    bool straddled_reset;  /* a reset overtook it: answered 500, not executed, not counted */
    bool store_down;       /* --store redis:// could not be reached for it: answered 503
                              (gateway_refuse_store) */
    bool fault_acted;      /* its planned fault changed what it was sent (answer.c) */
    int64_t sent_ns;       /* monotonic: the answer was handed to libmicrohttpd (http.c) */
    bool client_done;      /* the client had finished sending (its end-of-file, or a reset,
                              was waiting) when its answer was handed over: it may have left or
                              only half-closed, which only the socket tells later (http.c) */
    struct tcp_fate tcp;   /* what the socket said of the answer at completion (http.c) */
    struct report_mark report; /* its steps through the report (report.c) */
    bool judged;           /* judged by the report (observe_sent, else at completion) */
    bool counted;          /* counted in the metrics (the same, but a hang at completion) */
};

struct idem_record;
struct payment;

struct request {
    /* Transport (http.c). */
    enum http_method method;
    char method_str[12];
    char *raw_uri;         /* as on the wire, before percent-decoding */
    char *path;            /* decoded path, without the query */
    char *query;           /* raw query string after '?', or NULL */
    char *authorization;   /* Authorization header value, or NULL */
    char *idem_key_raw;    /* Idempotency-Key value as received, or NULL */
    char *test_code;       /* TossPayments-Test-Code value, or NULL */
    char *ovr_profile;     /* X-Fakegate-Profile, or NULL */
    char *ovr_tenant;      /* X-Fakegate-Tenant (admin calls: the tenant they act on), or NULL */
    char *ovr_fault;       /* X-Fakegate-Fault, or NULL */
    char *ovr_latency;     /* X-Fakegate-Latency-Ms, or NULL */
    const char *ovr_twice; /* the name of an X-Fakegate-* header sent twice (400), or NULL */
    int idem_key_count;    /* how many Idempotency-Key headers */
    bool idem_key_folded;  /* one was folded over several lines */
    bool lang_en;          /* Accept-Language asks for English */
    bool has_content_length;
    uint64_t content_length;
    bool chunked;
    const char *framing_error; /* a static message: two different Content-Length values, or a
                                  Transfer-Encoding other than chunked (RFC 9112 §6.3: 400 and
                                  close, the body's length cannot be known) */
    bool header_too_large; /* request line + headers above 8 KiB */
    struct buf body;
    bool body_too_large;
    int64_t arrived_ns;    /* monotonic: headers complete */
    int64_t received_ns;   /* monotonic: whole request received */
    int64_t arrived_unix_us;

    /* Routing (router.c). */
    enum route_kind kind;
    enum route_id route;   /* profile route */
    char *path_param;      /* paymentKey or orderId from the path */

    struct admit_state adm; /* admit.c */
    struct observe_state obs; /* observe.c, and the modules that learn what it records */

    /* The plan and the claim (payments.c). */
    uint32_t attempt;
    const struct fault *fault; /* the planned fault, or NULL (borrowed from the profile) */
    enum req_phase phase;
    int64_t hold_until_ns; /* with H_HOLD */
    double queue_latency_ms, latency_ms;
    char *payment_key, *order_id;
    int64_t amount;
    char *cancel_reason;   /* cancel: cancelReason */
    int64_t cancel_amount; /* cancel: cancelAmount, 0 = absent (the whole balance) */
    int64_t refundable_amount; /* cancel: refundableAmount, 0 = absent */
    char *refund_bank, *refund_account, *refund_holder; /* cancel: refundReceiveAccount {bank,
                                                           accountNumber, holderName}, or NULL */
    struct payment_va *va; /* virtual-account issue: its fields (owned until the ledger takes
                              them), due_at_us absolute, or 0 with va_valid_us relative */
    char *order_name;      /* virtual-account issue: orderName */
    int64_t va_valid_us;   /* virtual-account issue: the due date's distance from the commit */
    uint64_t body_hash;    /* canonical body hash, for Idempotency-Key reuse detection */
    struct idem_record *claim; /* the record this request holds (PROCESSING), or NULL; valid
                                  while adm.generation is the store's */
    struct payment *payment; /* confirm: the payment of payment_key, found or created at
                                arrival (borrowed; valid while adm.generation is the store's) */
    struct cluster_slot *processing_mark; /* --store redis://: the cluster's `processing` mark
                                of its payment (cluster_limits_mark), held from its checks to
                                its commit; NULL without */

    struct response resp;
};

/* Allocate a zeroed request. NULL on out of memory. */
struct request *request_new(void);

/* Free a request and all it owns. NULL allowed. Only http.c's completion callback calls it. */
void request_free(struct request *r);

/* Set resp to a Toss error `code` (status and message from the table, in the request's
 * language) or, when message is non-NULL, with that message. */
void request_error(struct request *r, const char *code, const char *message);

/* The percent-decoded value of query parameter `name` ('+' is a space), or NULL if absent or
 * out of memory. Caller frees. "%00" stays as it is: a C string cannot hold the NUL, and
 * decoding it would cut the value short (startingAfter=KEY%00JUNK would find KEY's row); left
 * encoded, a value with it matches no key, date or number. */
char *request_query(const struct request *r, const char *name);

/* Set resp to an injected rejection (throttle, cap, error fault): `status`, and a body of kind
 * `body` — json {code, message} (message NULL: the table's, in the request's language), an
 * html page as a load balancer sends it, or empty — with the Retry-After `ra` says (`auto_s`:
 * the seconds "auto" stands for; `wait_s`: the exact wait they round up), its text in
 * resp.retry_after, its seconds in resp.retry_after_s and, for an http-date, the instant it
 * names in resp.retry_after_until_ns. */
void request_reject(struct request *r, int status, const char *code, const char *message,
                    enum body_kind body, const struct retry_after *ra, uint32_t auto_s,
                    double wait_s);

/* request_error for an answer of fakegate's own (a reset overtook the request, the server is
 * stopping, memory ran out): no fault applies to it on the way out. */
void request_internal(struct request *r, const char *code);

/* Set resp to `status` with a body the response takes ownership of. */
void request_respond(struct request *r, int status, char *body, size_t len);

#endif
