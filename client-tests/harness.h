/* harness.h -- black-box test harness: start the built fakegate on port 0, talk HTTP to it.
 * Every server is a child of the calling process, found through its port file, and dies with
 * the thread that started it (PR_SET_PDEATHSIG: a failing Check test leaves through _exit) or at
 * exit (atexit), so no test leaves a server behind; temp dirs of dead owners are swept by the
 * next test process. Only 127.0.0.1 is ever contacted. No fixed ports, no pkill. */
#ifndef FAKEGATE_HARNESS_H
#define FAKEGATE_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <jansson.h>

#define FG_ERR_LEN 1024
#define FG_PATH_LEN 512
#define FG_DIR_LEN 256

/* base64("test_sk_fakegate:"): the key every test uses unless it starts the server with
 * --secret-key (fg_opts.secret_key). */
#define FG_DEFAULT_SECRET_KEY "test_sk_fakegate"

/* A profile with no latency anywhere: what fg_start uses when the caller names no profile, so
 * that a test never depends on the shipped `normal` profile's faults. */
#define FG_PROFILE_INSTANT \
    "{\"name\":\"instant\",\"routes\":{\"default\":{\"latency\":{\"dist\":\"fixed\",\"ms\":0}}}}"

/* How to start a server. Zero-initialise, then set what you need. */
typedef struct fg_opts {
    /* Profile JSON text; written to <tmpdir>/profile.json and passed as `--profile PATH`.
     * NULL: FG_PROFILE_INSTANT, unless `args` already contains "--profile". */
    const char *profile_json;
    /* Passed as `--secret-key KEY` and used for fg_server.auth_header. NULL: no flag, and the
     * default auth uses FG_DEFAULT_SECRET_KEY (accepted because it starts `test_sk_`). */
    const char *secret_key;
    /* More arguments, NULL-terminated (e.g. {"--max-body", "1024", NULL}); may be NULL.
     * Borrowed for the duration of fg_start only. */
    const char *const *args;
    /* Read the child's stdout through a pipe: fg_start then waits (at most 5 s) for the first
     * line and stores it in fg_server.ready_line. false: stdout goes to <tmpdir>/stdout. */
    bool capture_stdout;
    /* Do not pass --quiet: the access log and start-up notes go to the child's stderr
     * (<tmpdir>/stderr, read with fg_server_stderr). false: --quiet, as before. */
    bool access_log;
} fg_opts;

/* A running (or stopped) server. Owned by the caller: fg_free. Fields are read-only. */
typedef struct fg_server {
    pid_t pid;                        /* the child we forked and exec'd */
    int port;                         /* from the port file, 1..65535 */
    bool running;                     /* false once fg_wait/fg_stop collected its exit status */
    int exit_status;                  /* when !running: exit code, 128+signal if killed */
    char dir[FG_DIR_LEN];             /* private temp dir: port file, stderr, profile */
    char port_file[FG_PATH_LEN];      /* <dir>/port, passed as --port-file */
    char stderr_path[FG_PATH_LEN];    /* <dir>/stderr: the child's stderr */
    char profile_path[FG_PATH_LEN];   /* <dir>/profile.json, or "" if none was written */
    char auth_header[256];            /* "Authorization: Basic base64(KEY:)" for the default key */
    char ready_line[512];             /* first stdout line without its '\n' (capture_stdout) */
    int stdout_fd;                    /* read end of the stdout pipe, or -1 */
} fg_server;

/* $FAKEGATE_WRAP when set and not empty, else NULL: a program every server and one-shot run of
 * this harness is started through, with the server's whole command line as its arguments
 * (`make memcheck` sets it to scripts/memcheck-wrap, which execs valgrind: the pid a test holds
 * and signals is still the server's, and so is its exit status, unless valgrind found an error).
 * An absolute path, since a child may start in another directory. Borrowed from the environment. */
const char *fg_wrapper(void);

/* Start $FAKEGATE_BIN (default "build/fakegate"), through fg_wrapper() when set, with `--port 0
 * --port-file <tmpdir>/port --quiet` (without --quiet if opts->access_log), the profile, the secret
 * key and opts->args. Waits at most 10 s for the port file to appear non-empty while checking
 * (waitpid WNOHANG) that the child has not exited, then sends one GET /healthz and requires 200 (no
 * retry: the port file must be written only after the socket listens); with capture_stdout, at most
 * 5 s for the ready line. Through fg_wrapper() these waits, and fg_stop's, are 6 times as long
 * (valgrind starts a server 20-50 times slower). `opts` may be NULL (all defaults). Returns the
 * server (caller owns it: fg_free), or NULL with a message in `err` (it includes the child's exit
 * status and stderr when the child died). Thread: the child is killed with SIGKILL when the
 * *calling thread* exits (PR_SET_PDEATHSIG), so call it from the thread that outlives the server,
 * normally the test's main thread. */
fg_server *fg_start(const fg_opts *opts, char err[FG_ERR_LEN]);

/* Start another program (redis-server, nginx: never through fg_wrapper()) the way fg_start
 * starts a server: argv[0] is a path, or a name looked up on $PATH, then /usr/sbin and /sbin;
 * stdin /dev/null, stdout and stderr both written to the file `log_path` (created or
 * truncated), SIGKILL when the calling thread exits (PR_SET_PDEATHSIG). argv is
 * NULL-terminated, at most 80 words. Returns the child's pid (the caller waits for it:
 * waitpid), or -1 with a message in `err`. It does not wait for the program to be ready.
 * Thread: as fg_start. */
pid_t fg_spawn(const char *const *argv, const char *log_path, char err[FG_ERR_LEN]);

/* Send signal `sig` to the server's own pid (never a group). Returns 0, or -1 if it is not
 * running or kill failed. */
int fg_kill(const fg_server *s, int sig);

/* Wait at most `timeout_ms` milliseconds for the child to exit (polls waitpid WNOHANG every
 * 1 ms). Returns its exit code (0..255), 128+N if killed by signal N, or -2 on timeout (the
 * child is left running). Idempotent once the child has been collected. */
int fg_wait(fg_server *s, int timeout_ms);

/* SIGTERM, then fg_wait 5 s (30 s through fg_wrapper()); on timeout SIGKILL and collect.
 * Returns the exit status as fg_wait does (137 after the fallback SIGKILL), so a clean shutdown
 * returns 0. Leaves the temp dir in place (tests check the port file is gone); fg_free removes
 * it. */
int fg_stop(fg_server *s);

/* Kill (SIGKILL) the child if still running, collect it, close the pipe, delete the temp dir
 * and free `s`. NULL is allowed. */
void fg_free(fg_server *s);

/* Contents of the child's stderr so far. Caller owns the result (free); never NULL. */
char *fg_server_stderr(const fg_server *s);

/* Read whatever the child wrote to stdout after the ready line, until EOF or `timeout_ms`.
 * Only with capture_stdout, normally after fg_stop. Caller owns the result; never NULL. */
char *fg_read_rest_of_stdout(fg_server *s, int timeout_ms);

/* --- One-shot runs (CLI tests) ------------------------------------------------------------ */

typedef struct fg_run_result {
    int exit_status;   /* exit code, 128+signal, or -1 if it did not exit within the timeout */
    char *out;         /* stdout, NUL-terminated, never NULL after fg_run */
    char *err;         /* stderr, NUL-terminated, never NULL after fg_run */
} fg_run_result;

/* Run $FAKEGATE_BIN (through fg_wrapper() when set) with exactly `args` (NULL-terminated, may be
 * NULL) — no implicit flags — stdin /dev/null, stdout and stderr captured. Waits at most
 * `timeout_ms` ms, then SIGKILLs it (exit_status -1). Returns 0, or -1 if it could not be started
 * (message in `err`). Caller owns `out`'s strings: fg_run_result_fini. */
int fg_run(const char *const *args, int timeout_ms, fg_run_result *out, char err[FG_ERR_LEN]);
void fg_run_result_fini(fg_run_result *r);

/* Write `json` to a new file `profile.json` in a new private temp dir. Returns its absolute
 * path (caller owns it: fg_remove_profile), or NULL on error. */
char *fg_write_profile(const char *json);
/* Delete the file and its temp dir and free `path`. NULL is allowed. */
void fg_remove_profile(char *path);

/* --- HTTP ---------------------------------------------------------------------------------- */

typedef struct fg_request {
    const char *method;          /* "GET" (NULL means GET), "POST", "DELETE", ... */
    const char *path;            /* already URL-encoded, starting with '/' */
    const char *body;            /* NULL: no body */
    size_t body_len;             /* bytes of body; 0 with body != NULL means strlen(body) */
    /* Extra header lines "Name: value", NULL-terminated; may be NULL. "Name;" sends an empty
     * header (curl's convention); "Name:" suppresses one curl would add. Unless given here, the
     * harness adds "Content-Type: application/json" to a body and suppresses curl's
     * "Expect: 100-continue". No Authorization is added: pass s->auth_header yourself. */
    const char *const *headers;
    long timeout_ms;             /* whole request; 0 means 10 000 */
    bool forbid_reuse;           /* CURLOPT_FORBID_REUSE: close the connection afterwards */
    bool chunked;                /* send the body with Transfer-Encoding: chunked */
    long expect_100_timeout_ms;  /* CURLOPT_EXPECT_100_TIMEOUT_MS when > 0 */
} fg_request;

typedef struct fg_response {
    CURLcode curl_code;          /* CURLE_OK if a response was received */
    char curl_error[CURL_ERROR_SIZE];
    long status;                 /* HTTP status of the final response, 0 if none */
    char *body;                  /* raw body bytes, NUL-terminated (malloc'd, never NULL) */
    size_t body_len;             /* bytes in body, not counting the terminator */
    json_t *json;                /* body parsed as JSON, NULL if it is not JSON (owned) */
    char *header_block;          /* the final response's header lines as received (malloc'd) */
    /* Selected headers of the final response, value trimmed, "" if absent (the last one wins
     * if repeated; trace_id_count says how many trace ids came). */
    char content_type[256];
    char connection[64];
    char trace_id[128];
    int trace_id_count;
    char allow[128];
    char cache_control[256];
    char retry_after[128];
    int64_t sent_ns;             /* CLOCK_MONOTONIC ns just before the request was started */
    int64_t done_ns;             /* CLOCK_MONOTONIC ns when curl returned */
    /* curl's own timings of this transfer (µs since it started), also on a curl error:
     * CURLINFO_STARTTRANSFER_TIME_T (first response byte) and CURLINFO_TOTAL_TIME_T. */
    int64_t starttransfer_us;
    int64_t total_us;
} fg_response;

/* One HTTP/1.1 exchange with http://127.0.0.1:<s->port><req->path>. `h` is a curl easy handle
 * to reuse (keep-alive; it is curl_easy_reset first, connections survive that) or NULL for a
 * fresh one. Always fills *out (caller must fg_response_fini it, whatever the result).
 * Returns 0 if an HTTP response was received, -1 otherwise (see out->curl_code, curl_error).
 * Thread: any thread; one handle per thread. */
int fg_http(const fg_server *s, CURL *h, const fg_request *req, fg_response *out);

/* Free what *r owns and zero it. */
void fg_response_fini(fg_response *r);

/* GET `path` with s->auth_header. Same returns as fg_http. */
int fg_get(const fg_server *s, const char *path, fg_response *out);

/* POST /v1/payments/confirm {"paymentKey", "orderId", "amount"} with s->auth_header and,
 * if `idempotency_key` is not NULL, that Idempotency-Key. `amount` in KRW. Same returns as
 * fg_http. fg_confirm_on reuses the handle `h` (may be NULL) for keep-alive. */
int fg_confirm(const fg_server *s, const char *payment_key, const char *order_id,
               long long amount, const char *idempotency_key, fg_response *out);
int fg_confirm_on(const fg_server *s, CURL *h, const char *payment_key, const char *order_id,
                  long long amount, const char *idempotency_key, fg_response *out);

/* GET /__admin/payments (with ?orderId=`order_id` unless NULL). Returns a new reference to the
 * "payments" array (caller json_decrefs it), or NULL if the call failed or the shape is wrong. */
json_t *fg_admin_payments(const fg_server *s, const char *order_id);

/* --- Raw TCP (what curl will not send) ----------------------------------------------------- */

typedef struct fg_raw_response {
    char *data;          /* every byte received, NUL-terminated (malloc'd, never NULL) */
    size_t len;
    bool closed;         /* the server closed the connection (EOF or reset) before the timeout */
    int status;          /* status of the first final (non-1xx) response, 0 if unparseable */
    const char *headers; /* into data: first header line of that response, or NULL */
    const char *body;    /* into data: its body (Content-Length bytes if given), or NULL */
    size_t body_len;
    json_t *json;        /* body as JSON or NULL (owned) */
} fg_raw_response;

/* Connect to 127.0.0.1:s->port, write `len` bytes of `request` exactly as given, then read
 * until the server closes the connection or `timeout_ms` ms pass (so use it where a close is
 * expected, or accept the wait). Returns 0 if it connected and wrote, else -1 (message in
 * `err`). Caller must fg_raw_response_fini *out. */
int fg_raw(const fg_server *s, const void *request, size_t len, int timeout_ms,
           fg_raw_response *out, char err[FG_ERR_LEN]);
void fg_raw_response_fini(fg_raw_response *r);

/* fg_raw in two steps, for a test that holds several connections, or acts on one (a
 * shutdown(SHUT_WR), a close), between writing and reading. fg_raw_open connects to
 * 127.0.0.1:s->port and writes `len` bytes of `request` exactly as given: the socket (caller
 * owns it), or -1 with a message in `err`. fg_raw_finish reads `fd` until the server closes the
 * connection or `timeout_ms` ms pass, closes `fd` and parses what came into *out (caller
 * fg_raw_response_finis it). */
int fg_raw_open(const fg_server *s, const void *request, size_t len, char err[FG_ERR_LEN]);
void fg_raw_finish(int fd, int timeout_ms, fg_raw_response *out);

/* Copy the value (trimmed) of header `name` (case-insensitive) of the parsed raw response into
 * buf (size bytes). Returns true if present. */
bool fg_raw_header(const fg_raw_response *r, const char *name, char *buf, size_t size);

/* --- Small helpers ------------------------------------------------------------------------- */

/* Write "Authorization: Basic base64(`credentials`)" into buf (size bytes); `credentials` is
 * taken verbatim (pass "key:" for a well-formed one). Returns buf. */
char *fg_basic_auth(const char *credentials, char *buf, size_t size);

/* Standard base64 of `len` bytes into buf (NUL-terminated). Returns buf, or NULL if too small. */
char *fg_base64(const void *data, size_t len, char *buf, size_t size);

/* json_string_value of member `key` of object `obj`, or NULL (also for non-strings). Borrowed. */
const char *fg_json_str(const json_t *obj, const char *key);

/* The "code" of a Toss error body, or NULL. Borrowed from r->json. */
const char *fg_error_code(const fg_response *r);

/* CLOCK_MONOTONIC in ns / ms. */
int64_t fg_now_ns(void);
int64_t fg_now_ms(void);

/* A "kB" field of /proc/<pid>/status -- "VmRSS" (resident now), "VmHWM" (its peak) -- in kB,
 * or -1 if the process or the field is not there. Thread: any. */
long fg_proc_kb(pid_t pid, const char *field);

/* Sleep `ms` milliseconds (nanosleep, restarted on EINTR). For polling loops only, never as
 * synchronisation. */
void fg_pause_ms(long ms);

#endif
