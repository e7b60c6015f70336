/* soak.h -- `make soak`: is fakegate's memory flat over a long run whose idempotency and session
 * TTLs are much shorter than the run? A few keep-alive client threads send what a long-lived CI
 * server sees -- new payments confirmed under fresh Idempotency-Keys, confirms and cancels of
 * existing payments resent under fresh keys, under their first key and without a key, resends
 * after a failure, reads -- while fakegate's resident set (/proc/PID/status VmRSS) is sampled at
 * a fixed interval. After a warm-up of 2 TTLs, every sample must stay within 10 % of the sample
 * at the end of the warm-up. The workload and why it is built so are in soak.c's header; the
 * runner is client-tests/soak/main.c. */
#ifndef FAKEGATE_SOAK_H
#define FAKEGATE_SOAK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"

typedef struct sk_config {
    int seconds;           /* the whole run, s (SOAK_SECONDS; default 600) */
    int ttl_s;             /* fakegate's --idempotency-ttl and --session-ttl, s (default 30) */
    int warmup_ttls;       /* the warm-up, in TTLs (default 2) */
    int sample_s;          /* one RSS sample every sample_s seconds (default 10) */
    int threads;           /* client threads, each with one keep-alive curl handle (default 4) */
    int payments;          /* the bounded pool of paymentKeys (default 1000) */
    int rate;              /* requests per second, all threads together (default 2500; 0: as
                              fast as fakegate answers). A steady rate holds a steady number of
                              TTL-bounded records, so the RSS shows leaks, not load swings */
    double max_growth;     /* allowed growth after the warm-up, a fraction (default 0.10) */
    uint64_t seed;         /* the profile's seed and the clients' (default 42) */
} sk_config;

/* 600 s, TTLs of 30 s, a warm-up of 2 TTLs, samples every 10 s, 4 threads, 1000 paymentKeys,
 * 2500 requests/s, 10 % growth allowed, seed 42. */
void sk_config_default(sk_config *c);

/* What the clients send (docs of each in soak.c's header). */
enum sk_op {
    SK_NEW_PAYMENT, SK_CONFIRM_NEW_KEY, SK_CONFIRM_SAME_KEY, SK_CONFIRM_KEYLESS,
    SK_CANCEL_NEW_KEY, SK_CANCEL_SAME_KEY, SK_CANCEL_KEYLESS, SK_READ_BY_KEY, SK_READ_BY_ORDER,
    SK_RESEND_AFTER_FAILURE, SK_OPS
};
/* What they got. */
enum sk_answer { SK_2XX, SK_409, SK_4XX, SK_5XX, SK_NO_ANSWER, SK_ANSWERS };
extern const char *const sk_op_names[SK_OPS];
extern const char *const sk_answer_names[SK_ANSWERS];

/* One sample, `t_s` seconds after the load started. */
typedef struct sk_sample {
    int t_s;
    long rss_kb;           /* VmRSS, kB */
    long requests;         /* the clients' requests answered or failed so far */
    long idem_records;     /* fakegate_idempotency_records (-1: /metrics did not answer) */
} sk_sample;

#define SK_MAX_SAMPLES 4096

typedef struct sk_result {
    long by[SK_OPS][SK_ANSWERS];
    long requests;
    long fresh_keys;           /* distinct Idempotency-Keys the clients made up */
    double wall_s;             /* the load's duration */
    int n_samples;
    sk_sample samples[SK_MAX_SAMPLES];
    int base;                  /* the sample at the end of the warm-up, or -1 (run too short) */
    long max_after_kb;         /* the largest RSS after it */
    double growth;             /* max_after_kb / base's RSS - 1 */
    double bytes_per_request;  /* (last RSS - base RSS) / requests between them */
    long payments;             /* the ledger at the end (GET /__admin/payments), -1: unknown */
    bool pass;                 /* base >= 0 and growth <= max_growth */
} sk_result;

/* The flags fakegate is started with for config c (fg_opts.args, NULL-terminated): both TTLs
 * (c->ttl_s), a consecutive-cancel window of 0 and the seed. `store` holds the numbers' text;
 * it and argv must outlive fg_start. The profile is sk_profile_json (fg_opts.profile_json). */
void sk_server_args(const sk_config *c, char store[2][24], const char *argv[10]);

/* The soak's profile (JSON): confirms and cancels of 1 ms with a few failures, instant reads. */
extern const char sk_profile_json[];

/* Run the load against `s` (a fakegate of pid s->pid started with sk_server_args) for
 * c->seconds, sampling its RSS every c->sample_s seconds; each sample is printed to `progress`
 * (may be NULL) as it is taken. Fills *out (a large struct: the caller's static or heap copy).
 * Returns 0 when the run went through (its verdict is out->pass), -1 with a message in `err`
 * when it could not (no RSS to read, a thread not started). Thread: the caller's; it starts
 * c->threads threads and joins them before returning. */
int sk_run(const fg_server *s, const sk_config *c, sk_result *out, FILE *progress,
           char err[FG_ERR_LEN]);

/* Print the run's figures: requests by kind and answer, the RSS series, the verdict. */
void sk_print(FILE *f, const sk_config *c, const sk_result *r);

/* One progress line for sample `sm` (the format sk_print's series uses). */
void sk_print_sample(FILE *f, const sk_sample *sm);


#endif
