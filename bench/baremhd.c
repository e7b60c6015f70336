/* baremhd -- libmicrohttpd alone, for `make bench` (bench/run.sh): the floor under fakegate.
 *
 *   baremhd --port PORT --body FILE [--hold-ms MS] [--threads N] [--parse-json]
 *
 * Built like fakegate's HTTP layer (server/src/http.c) and nothing else: the same daemon flags
 * (internal polling threads, epoll, suspend/resume), N worker threads (default 2, fakegate's
 * default), 127.0.0.1, a 30 s idle timeout, a 10 KiB connection pool, a connection limit
 * from RLIMIT_NOFILE, a listen backlog of 4096. Every request's body is read (and thrown away
 * unless --parse-json); the answer is 200 with FILE's bytes (a real fakegate confirm body)
 * and Content-Type: application/json. With
 * --hold-ms, each request is suspended and a timer thread resumes it MS milliseconds after it
 * was read (a FIFO queue is enough: every hold is the same length), as fakegate's scheduler
 * does. With --parse-json, each request's body is kept (up to 4 KiB; a longer one is not
 * parsed) and parsed with jansson (json_loadb, json_decref), as fakegate must parse a confirm:
 * libmicrohttpd plus the one piece of JSON work fakegate cannot drop. No ledger, no
 * idempotency, no journal, no rendering: what fakegate adds on top is the difference in the
 * same run.
 * Runs until SIGTERM or SIGINT; exits 1 when it cannot start.
 */
#define _GNU_SOURCE
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static char *body;
static size_t body_len;
static int64_t hold_ns;
static int parse_json;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* --- the hold queue: FIFO, deadlines in arrival order ---------------------------------------- */
struct held {
    struct MHD_Connection *conn;
    int64_t deadline_ns;
};
static struct held *queue;
static size_t q_head, q_tail, q_cap; /* q_cap a power of two; empty when head == tail */
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond;

static int hold(struct MHD_Connection *c)
{
    pthread_mutex_lock(&q_lock);
    if (q_tail - q_head == q_cap) {
        size_t cap = q_cap * 2;
        struct held *q = malloc(cap * sizeof *q);
        if (!q) {
            pthread_mutex_unlock(&q_lock);
            return -1;
        }
        for (size_t i = q_head; i != q_tail; i++)
            q[i - q_head] = queue[i & (q_cap - 1)];
        free(queue);
        queue = q;
        q_tail -= q_head;
        q_head = 0;
        q_cap = cap;
    }
    queue[q_tail++ & (q_cap - 1)] = (struct held){c, now_ns() + hold_ns};
    pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
    return 0;
}

static void *timer(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&q_lock);
    for (;;) {
        if (q_head == q_tail) {
            pthread_cond_wait(&q_cond, &q_lock);
            continue;
        }
        struct held h = queue[q_head & (q_cap - 1)];
        if (h.deadline_ns > now_ns()) {
            struct timespec ts = {h.deadline_ns / 1000000000, h.deadline_ns % 1000000000};
            pthread_cond_timedwait(&q_cond, &q_lock, &ts);
            continue;
        }
        q_head++;
        pthread_mutex_unlock(&q_lock);
        MHD_resume_connection(h.conn);
        pthread_mutex_lock(&q_lock);
    }
    return NULL;
}

/* --- the handler ------------------------------------------------------------------------------ */
#define BODY_MAX 4096 /* --parse-json: a longer body is read, not parsed (the bench's: ~100 B) */

struct req {
    int held;
    int too_long;  /* the body passed BODY_MAX: not parsed */
    size_t len;
    char *body;    /* --parse-json only: BODY_MAX bytes, else NULL */
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)cls, (void)url, (void)method, (void)version;
    struct req *q = *con_cls;
    if (!q) {
        q = calloc(1, sizeof *q);
        if (!q)
            return MHD_NO;
        if (parse_json && !(q->body = malloc(BODY_MAX))) {
            free(q);
            return MHD_NO;
        }
        *con_cls = q;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        if (q->body && !q->too_long && n <= BODY_MAX - q->len) {
            memcpy(q->body + q->len, upload_data, n);
            q->len += n;
        } else {
            q->too_long = 1; /* never splice the parts around a dropped one */
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (q->len > 0 && !q->too_long) { /* --parse-json */
        json_t *j = json_loadb(q->body, q->len, 0, NULL);
        if (!j)
            return MHD_NO;
        json_decref(j);
        q->len = 0;
    }
    if (!q->held && hold_ns > 0) {
        q->held = 1;
        MHD_suspend_connection(c);
        if (hold(c) != 0)
            MHD_resume_connection(c); /* out of memory: answer at once */
        return MHD_YES;
    }
    struct MHD_Response *r =
        MHD_create_response_from_buffer(body_len, body, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)cls, (void)c, (void)toe;
    struct req *q = *con_cls;
    if (q)
        free(q->body);
    free(q);
    *con_cls = NULL;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0, got;
    do {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            char *b = realloc(buf, cap);
            if (!b) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = b;
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    *len = n;
    return buf;
}

int main(int argc, char **argv)
{
    unsigned port = 0, threads = 2;
    const char *body_path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--parse-json") == 0) {
            parse_json = 1;
            continue;
        }
        if (i + 1 == argc)
            break;
        if (strcmp(argv[i], "--port") == 0)
            port = (unsigned)strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--body") == 0)
            body_path = argv[i + 1];
        else if (strcmp(argv[i], "--hold-ms") == 0)
            hold_ns = strtoll(argv[i + 1], NULL, 10) * 1000000;
        else if (strcmp(argv[i], "--threads") == 0)
            threads = (unsigned)strtoul(argv[i + 1], NULL, 10);
        i++;
    }
    if (port == 0 || port > 65535 || !body_path || threads < 1) {
        fprintf(stderr, "usage: baremhd --port PORT --body FILE [--hold-ms MS] [--threads N]"
                        " [--parse-json]\n");
        return 1;
    }
    body = read_file(body_path, &body_len);
    if (!body) {
        perror(body_path);
        return 1;
    }
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL); /* every thread started below inherits it */
    q_cap = 1024;
    queue = malloc(q_cap * sizeof *queue);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&q_cond, &ca);
    pthread_t t;
    if (!queue || pthread_create(&t, NULL, timer, NULL) != 0) {
        fprintf(stderr, "baremhd: cannot start the timer thread\n");
        return 1;
    }

    struct rlimit rl;
    unsigned limit = 1000;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
        /* Keep descriptors for the listen socket, epoll and the ITC pipe, as fakegate does. */
        limit = rl.rlim_cur > 1048576 ? 1048576 - 64
                : rl.rlim_cur > 128   ? (unsigned)rl.rlim_cur - 64
                                      : (unsigned)rl.rlim_cur / 2;
    }

    /* 127.0.0.1 and a 30 s idle timeout, as fakegate's defaults. */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct MHD_OptionItem pool[] = {{MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)threads, NULL},
                                    {MHD_OPTION_END, 0, NULL}};
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
            MHD_USE_ERROR_LOG,
        (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_ARRAY,
        threads > 1 ? pool : pool + 1, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_TIMEOUT, 30U, MHD_OPTION_CONNECTION_LIMIT, limit,
        MHD_OPTION_LISTEN_BACKLOG_SIZE, 4096U, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)10240, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "baremhd: cannot listen on port %u\n", port);
        return 1;
    }
    int sig;
    sigwait(&sigs, &sig);
    /* Exit without MHD_stop_daemon: it aborts while any connection is suspended. */
    _Exit(0);
}
