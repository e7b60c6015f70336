/* harness.c -- start fakegate children on port 0 and drive them over HTTP (libcurl) or raw TCP.
 * Invariants: a child is only ever signalled through the pid we forked; every child we start is
 * in the live list until collected, and the list is SIGKILLed at exit; every bounded wait polls
 * a condition (file, waitpid, socket) with a short nanosleep, never sleeps as synchronisation. */
#define _GNU_SOURCE

#include "harness.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The harness's own waits for a server to start and to stop; a server run through
 * fg_wrapper() (valgrind, 20-50 times slower to start) gets WRAPPED_SLOWDOWN times as long. */
#define START_TIMEOUT_MS (10000 * slowdown())
#define READY_LINE_TIMEOUT_MS (5000 * slowdown())
#define STOP_TIMEOUT_MS (5000 * slowdown())
#define WRAPPED_SLOWDOWN 6
#define DEFAULT_HTTP_TIMEOUT_MS 10000L
#define MAX_BODY_BYTES (64u * 1024u * 1024u)
#define MAX_ARGS 64
#define MAX_LIVE 64

/* ---- clocks and small utilities ---------------------------------------------------------- */

int64_t fg_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

int64_t fg_now_ms(void)
{
    return fg_now_ns() / 1000000;
}

void fg_pause_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

static void set_err(char err[FG_ERR_LEN], const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void set_err(char err[FG_ERR_LEN], const char *fmt, ...)
{
    if (err == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, FG_ERR_LEN, fmt, ap);
    va_end(ap);
}

static char *read_whole_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    if (p == NULL)
        abort();
    if (f != NULL) {
        size_t n;
        while ((n = fread(p + len, 1, cap - len - 1, f)) > 0) {
            len += n;
            if (cap - len - 1 == 0) {
                cap *= 2;
                char *q = realloc(p, cap);
                if (q == NULL)
                    abort();
                p = q;
            }
        }
        fclose(f);
    }
    p[len] = '\0';
    return p;
}

static int write_whole_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t n = strlen(text);
    int rc = fwrite(text, 1, n, f) == n ? 0 : -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

static void remove_temp_dir(const char *dir);

static const char *temp_base(void)
{
    const char *base = getenv("TMPDIR");
    return (base == NULL || base[0] == '\0') ? "/tmp" : base;
}

/* A Check test that fails leaves through _exit: its servers die (PR_SET_PDEATHSIG) but its temp
 * dirs stay. Dirs are named after the owning pid, so the next process removes those of owners
 * that no longer exist. */
static void sweep_orphan_dirs(void)
{
    const char *base = temp_base();
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        static const char prefix[] = "fakegate-test-";
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0)
            continue;
        char *end;
        long owner = strtol(e->d_name + sizeof prefix - 1, &end, 10);
        if (owner <= 0 || *end != '-' || owner == (long)getpid())
            continue;
        if (kill((pid_t)owner, 0) == -1 && errno == ESRCH) {
            char path[FG_PATH_LEN];
            snprintf(path, sizeof path, "%s/%s", base, e->d_name);
            remove_temp_dir(path);
        }
    }
    closedir(d);
}

static pthread_once_t sweep_once = PTHREAD_ONCE_INIT;

static int make_temp_dir(char *out, size_t size)
{
    pthread_once(&sweep_once, sweep_orphan_dirs);
    int n = snprintf(out, size, "%s/fakegate-test-%ld-XXXXXX", temp_base(), (long)getpid());
    if (n < 0 || (size_t)n >= size)
        return -1;
    return mkdtemp(out) != NULL ? 0 : -1;
}

/* Remove every entry of a flat directory, then the directory. */
static void remove_temp_dir(const char *dir)
{
    if (dir[0] == '\0')
        return;
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        char path[FG_PATH_LEN * 2];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static const char *fakegate_bin(void)
{
    const char *b = getenv("FAKEGATE_BIN");
    return (b != NULL && b[0] != '\0') ? b : "build/fakegate";
}

const char *fg_wrapper(void)
{
    const char *w = getenv("FAKEGATE_WRAP");
    return (w != NULL && w[0] != '\0') ? w : NULL;
}

static int slowdown(void)
{
    return fg_wrapper() != NULL ? WRAPPED_SLOWDOWN : 1;
}

static int status_code(int wstatus)
{
    if (WIFEXITED(wstatus))
        return WEXITSTATUS(wstatus);
    if (WIFSIGNALED(wstatus))
        return 128 + WTERMSIG(wstatus);
    return -1;
}

/* ---- the live list: what atexit kills ------------------------------------------------------ */

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static fg_server *live[MAX_LIVE];
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void kill_live_servers(void)
{
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < MAX_LIVE; i++) {
        fg_server *s = live[i];
        if (s == NULL)
            continue;
        if (s->running) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->running = false;
        }
        remove_temp_dir(s->dir);
        live[i] = NULL;
    }
    pthread_mutex_unlock(&live_lock);
}

static void register_atexit(void)
{
    atexit(kill_live_servers);
}

static void live_add(fg_server *s)
{
    pthread_once(&live_once, register_atexit);
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < MAX_LIVE; i++) {
        if (live[i] == NULL) {
            live[i] = s;
            break;
        }
    }
    pthread_mutex_unlock(&live_lock);
}

static void live_remove(const fg_server *s)
{
    pthread_mutex_lock(&live_lock);
    for (size_t i = 0; i < MAX_LIVE; i++)
        if (live[i] == s)
            live[i] = NULL;
    pthread_mutex_unlock(&live_lock);
}

/* ---- spawning ------------------------------------------------------------------------------ */

/* fork + exec argv[0] (through fg_wrapper() when set) with stdin /dev/null, stdout out_fd,
 * stderr err_fd. The child gets SIGKILL when the calling thread dies. Only async-signal-safe
 * calls between fork and exec. argv holds at most MAX_ARGS + 16 words and its NULL. */
static pid_t spawn_exact(char *const argv[], int out_fd, int err_fd, char err[FG_ERR_LEN]);

static pid_t spawn(char *const argv[], int out_fd, int err_fd, char err[FG_ERR_LEN])
{
    char *wrapped[MAX_ARGS + 18];
    if (fg_wrapper() != NULL) {
        size_t n = 0;
        wrapped[n++] = (char *)fg_wrapper();
        for (size_t i = 0; argv[i] != NULL && n < MAX_ARGS + 17; i++)
            wrapped[n++] = argv[i];
        wrapped[n] = NULL;
        argv = wrapped;
    }
    return spawn_exact(argv, out_fd, err_fd, err);
}

/* spawn without the wrapper: argv[0] itself. */
static pid_t spawn_exact(char *const argv[], int out_fd, int err_fd, char err[FG_ERR_LEN])
{
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull < 0) {
        set_err(err, "open /dev/null: %s", strerror(errno));
        return -1;
    }
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigset_t none;
    sigemptyset(&none);
    static const char exec_failed[] = "harness: execv failed\n";
    pid_t parent = getpid();

    pid_t pid = fork();
    if (pid < 0) {
        set_err(err, "fork: %s", strerror(errno));
        close(devnull);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        static const int sigs[] = {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD};
        for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
            sigaction(sigs[i], &dfl, NULL);
        pthread_sigmask(SIG_SETMASK, &none, NULL);
        if (dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
            _exit(127);
        /* Our curl sockets must not leak into the server. */
        if (close_range(3, ~0u, 0) != 0)
            for (int fd = 3; fd < 4096; fd++)
                close(fd);
        execv(argv[0], argv);
        ssize_t w = write(2, exec_failed, sizeof exec_failed - 1);
        (void)w;
        _exit(127);
    }
    close(devnull);
    return pid;
}

/* Parse a port file: decimal digits, optional trailing whitespace. Returns the port or -1. */
static int read_port_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *end;
    errno = 0;
    long port = strtol(buf, &end, 10);
    if (errno != 0 || end == buf || port < 1 || port > 65535)
        return -1;
    while (*end != '\0' && isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    return (int)port;
}

/* Read one line (without '\n') from fd into buf within timeout_ms. Reads byte by byte so that
 * nothing after the line is consumed. Returns 0, or -1 on EOF/timeout. */
static int read_line_fd(int fd, char *buf, size_t size, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    size_t len = 0;
    buf[0] = '\0';
    for (;;) {
        int64_t left = deadline - fg_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        char c;
        ssize_t n = read(fd, &c, 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        if (c == '\n')
            return 0;
        if (len + 1 < size) {
            buf[len++] = c;
            buf[len] = '\0';
        }
    }
}

static void basic_auth_for_key(const char *key, char *buf, size_t size)
{
    char cred[200];
    snprintf(cred, sizeof cred, "%s:", key);
    fg_basic_auth(cred, buf, size);
}

static bool args_have(const char *const *args, const char *flag)
{
    for (size_t i = 0; args != NULL && args[i] != NULL; i++)
        if (strcmp(args[i], flag) == 0)
            return true;
    return false;
}

fg_server *fg_start(const fg_opts *opts, char err[FG_ERR_LEN])
{
    static const fg_opts none = {0};
    if (opts == NULL)
        opts = &none;
    fg_server *s = calloc(1, sizeof *s);
    if (s == NULL)
        abort();
    s->stdout_fd = -1;
    s->pid = -1;
    int out_fd = -1, err_fd = -1, pipe_fds[2] = {-1, -1};

    if (make_temp_dir(s->dir, sizeof s->dir) != 0) {
        set_err(err, "mkdtemp: %s", strerror(errno));
        free(s);
        return NULL;
    }
    snprintf(s->port_file, sizeof s->port_file, "%s/port", s->dir);
    snprintf(s->stderr_path, sizeof s->stderr_path, "%s/stderr", s->dir);
    basic_auth_for_key(opts->secret_key != NULL ? opts->secret_key : FG_DEFAULT_SECRET_KEY,
                       s->auth_header, sizeof s->auth_header);

    const char *argv[MAX_ARGS + 16];
    size_t argc = 0;
    argv[argc++] = fakegate_bin();
    argv[argc++] = "--port";
    argv[argc++] = "0";
    argv[argc++] = "--port-file";
    argv[argc++] = s->port_file;
    if (!opts->access_log)
        argv[argc++] = "--quiet";
    const char *profile = opts->profile_json;
    if (profile == NULL && !args_have(opts->args, "--profile"))
        profile = FG_PROFILE_INSTANT;
    if (profile != NULL) {
        snprintf(s->profile_path, sizeof s->profile_path, "%s/profile.json", s->dir);
        if (write_whole_file(s->profile_path, profile) != 0) {
            set_err(err, "writing %s: %s", s->profile_path, strerror(errno));
            goto fail;
        }
        argv[argc++] = "--profile";
        argv[argc++] = s->profile_path;
    }
    if (opts->secret_key != NULL) {
        argv[argc++] = "--secret-key";
        argv[argc++] = opts->secret_key;
    }
    for (size_t i = 0; opts->args != NULL && opts->args[i] != NULL; i++) {
        if (i >= MAX_ARGS) {
            set_err(err, "too many args");
            goto fail;
        }
        argv[argc++] = opts->args[i];
    }
    argv[argc] = NULL;

    err_fd = open(s->stderr_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (err_fd < 0) {
        set_err(err, "open %s: %s", s->stderr_path, strerror(errno));
        goto fail;
    }
    if (opts->capture_stdout) {
        if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
            set_err(err, "pipe2: %s", strerror(errno));
            goto fail;
        }
        out_fd = pipe_fds[1];
        s->stdout_fd = pipe_fds[0];
    } else {
        char path[FG_PATH_LEN];
        snprintf(path, sizeof path, "%s/stdout", s->dir);
        out_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (out_fd < 0) {
            set_err(err, "open %s: %s", path, strerror(errno));
            goto fail;
        }
    }

    s->pid = spawn((char *const *)argv, out_fd, err_fd, err);
    close(out_fd);
    out_fd = -1;
    close(err_fd);
    err_fd = -1;
    if (s->pid < 0)
        goto fail;
    s->running = true;
    live_add(s);

    int64_t deadline = fg_now_ms() + START_TIMEOUT_MS;
    for (;;) {
        int port = read_port_file(s->port_file);
        if (port > 0) {
            s->port = port;
            break;
        }
        int wst;
        if (waitpid(s->pid, &wst, WNOHANG) == s->pid) {
            s->running = false;
            s->exit_status = status_code(wst);
            char *e = fg_server_stderr(s);
            set_err(err, "%s exited with status %d before writing its port file; stderr: %s",
                    argv[0], s->exit_status, e);
            free(e);
            goto fail;
        }
        if (fg_now_ms() > deadline) {
            char *e = fg_server_stderr(s);
            set_err(err, "%s wrote no port file within %d ms; stderr: %s", argv[0],
                    START_TIMEOUT_MS, e);
            free(e);
            goto fail;
        }
        fg_pause_ms(2);
    }

    if (opts->capture_stdout &&
        read_line_fd(s->stdout_fd, s->ready_line, sizeof s->ready_line, READY_LINE_TIMEOUT_MS) != 0) {
        set_err(err, "no ready line on stdout within %d ms (got \"%s\")", READY_LINE_TIMEOUT_MS,
                s->ready_line);
        goto fail;
    }

    fg_response r;
    if (fg_get(s, "/healthz", &r) != 0 || r.status != 200) {
        set_err(err, "GET /healthz on port %d right after the port file appeared: curl \"%s\", "
                "status %ld, body %.200s", s->port, r.curl_error, r.status, r.body);
        fg_response_fini(&r);
        goto fail;
    }
    fg_response_fini(&r);
    return s;

fail:
    if (out_fd >= 0)
        close(out_fd);
    if (err_fd >= 0)
        close(err_fd);
    fg_free(s);
    return NULL;
}

/* The path of program `name` into buf: itself if it holds a '/', else the first executable
 * $PATH/name, /usr/sbin/name or /sbin/name (nginx lives in sbin, which a user's PATH may
 * lack). -1 if none. Resolved before the fork, so the child only calls execv. */
static int find_program(const char *name, char *buf, size_t size)
{
    if (strchr(name, '/') != NULL) {
        snprintf(buf, size, "%s", name);
        return 0;
    }
    const char *env = getenv("PATH");
    char dirs[4096];
    snprintf(dirs, sizeof dirs, "%s:/usr/sbin:/sbin", env != NULL ? env : "/usr/bin:/bin");
    char *save = NULL;
    for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        int n = snprintf(buf, size, "%s/%s", d[0] != '\0' ? d : ".", name);
        if (n > 0 && (size_t)n < size && access(buf, X_OK) == 0)
            return 0;
    }
    return -1;
}

pid_t fg_spawn(const char *const *argv, const char *log_path, char err[FG_ERR_LEN])
{
    char path[FG_PATH_LEN];
    const char *words[MAX_ARGS + 17];
    size_t n = 0;
    if (find_program(argv[0], path, sizeof path) != 0) {
        set_err(err, "%s: not found on PATH, /usr/sbin or /sbin", argv[0]);
        return -1;
    }
    words[n++] = path;
    for (size_t i = 1; argv[i] != NULL; i++) {
        if (n >= MAX_ARGS + 16) {
            set_err(err, "%s: too many arguments", argv[0]);
            return -1;
        }
        words[n++] = argv[i];
    }
    words[n] = NULL;
    int fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        set_err(err, "open %s: %s", log_path, strerror(errno));
        return -1;
    }
    pid_t pid = spawn_exact((char *const *)words, fd, fd, err);
    close(fd);
    return pid;
}

int fg_kill(const fg_server *s, int sig)
{
    if (s == NULL || !s->running || s->pid <= 0)
        return -1;
    return kill(s->pid, sig);
}

int fg_wait(fg_server *s, int timeout_ms)
{
    if (!s->running)
        return s->exit_status;
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        int wst;
        pid_t w = waitpid(s->pid, &wst, WNOHANG);
        if (w == s->pid) {
            s->running = false;
            s->exit_status = status_code(wst);
            return s->exit_status;
        }
        if (w < 0 && errno != EINTR) {
            s->running = false;
            s->exit_status = -1;
            return -1;
        }
        if (fg_now_ms() >= deadline)
            return -2;
        fg_pause_ms(1);
    }
}

int fg_stop(fg_server *s)
{
    if (!s->running)
        return s->exit_status;
    fg_kill(s, SIGTERM);
    int st = fg_wait(s, STOP_TIMEOUT_MS);
    if (st == -2) {
        fg_kill(s, SIGKILL);
        st = fg_wait(s, STOP_TIMEOUT_MS);
    }
    return st;
}

void fg_free(fg_server *s)
{
    if (s == NULL)
        return;
    if (s->running) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        s->running = false;
    }
    live_remove(s);
    if (s->stdout_fd >= 0)
        close(s->stdout_fd);
    remove_temp_dir(s->dir);
    free(s);
}

char *fg_server_stderr(const fg_server *s)
{
    return read_whole_file(s->stderr_path);
}

char *fg_read_rest_of_stdout(fg_server *s, int timeout_ms)
{
    size_t cap = 256, len = 0;
    char *p = malloc(cap);
    if (p == NULL)
        abort();
    p[0] = '\0';
    if (s->stdout_fd < 0)
        return p;
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        int64_t left = deadline - fg_now_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {.fd = s->stdout_fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (cap - len < 128) {
            cap *= 2;
            char *q = realloc(p, cap);
            if (q == NULL)
                abort();
            p = q;
        }
        ssize_t n = read(s->stdout_fd, p + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        p[len] = '\0';
    }
    return p;
}

/* ---- one-shot runs ------------------------------------------------------------------------- */

int fg_run(const char *const *args, int timeout_ms, fg_run_result *out, char err[FG_ERR_LEN])
{
    memset(out, 0, sizeof *out);
    out->exit_status = -1;
    char dir[FG_DIR_LEN], out_path[FG_PATH_LEN], err_path[FG_PATH_LEN];
    if (make_temp_dir(dir, sizeof dir) != 0) {
        set_err(err, "mkdtemp: %s", strerror(errno));
        out->out = strdup("");
        out->err = strdup("");
        return -1;
    }
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    const char *argv[MAX_ARGS + 2];
    size_t argc = 0;
    argv[argc++] = fakegate_bin();
    for (size_t i = 0; args != NULL && args[i] != NULL && i < MAX_ARGS; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;

    int rc = -1;
    int ofd = open(out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int efd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (ofd < 0 || efd < 0) {
        set_err(err, "open capture files: %s", strerror(errno));
    } else {
        pid_t pid = spawn((char *const *)argv, ofd, efd, err);
        if (pid > 0) {
            rc = 0;
            int64_t deadline = fg_now_ms() + timeout_ms;
            for (;;) {
                int wst;
                pid_t w = waitpid(pid, &wst, WNOHANG);
                if (w == pid) {
                    out->exit_status = status_code(wst);
                    break;
                }
                if (fg_now_ms() >= deadline) {
                    kill(pid, SIGKILL);
                    waitpid(pid, NULL, 0);
                    out->exit_status = -1;
                    break;
                }
                fg_pause_ms(1);
            }
        }
    }
    if (ofd >= 0)
        close(ofd);
    if (efd >= 0)
        close(efd);
    out->out = read_whole_file(out_path);
    out->err = read_whole_file(err_path);
    remove_temp_dir(dir);
    return rc;
}

void fg_run_result_fini(fg_run_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *fg_write_profile(const char *json)
{
    char dir[FG_DIR_LEN];
    if (make_temp_dir(dir, sizeof dir) != 0)
        return NULL;
    size_t n = strlen(dir) + sizeof "/profile.json";
    char *path = malloc(n);
    if (path == NULL)
        abort();
    snprintf(path, n, "%s/profile.json", dir);
    if (write_whole_file(path, json) != 0) {
        remove_temp_dir(dir);
        free(path);
        return NULL;
    }
    return path;
}

void fg_remove_profile(char *path)
{
    if (path == NULL)
        return;
    unlink(path);
    char *slash = strrchr(path, '/');
    if (slash != NULL) {
        *slash = '\0';
        rmdir(path);
    }
    free(path);
}

/* ---- HTTP through libcurl ------------------------------------------------------------------ */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct buf {
    char *p;
    size_t len, cap;
};

static int buf_add(struct buf *b, const void *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap != 0 ? b->cap : 1024;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = realloc(b->p, cap);
        if (q == NULL)
            return -1;
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

struct exchange {
    fg_response *r;
    struct buf body;
    struct buf headers;
    const char *upload;       /* chunked upload cursor */
    size_t upload_left;
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct exchange *x = ud;
    size_t n = size * nmemb;
    if (x->body.len + n > MAX_BODY_BYTES || buf_add(&x->body, ptr, n) != 0)
        return 0;
    return n;
}

static void copy_trimmed(char *dst, size_t size, const char *v, size_t n)
{
    while (n > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        n--;
    }
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t' || v[n - 1] == '\r' || v[n - 1] == '\n'))
        n--;
    if (n >= size)
        n = size - 1;
    memcpy(dst, v, n);
    dst[n] = '\0';
}

static void clear_headers(fg_response *r)
{
    r->content_type[0] = r->connection[0] = r->trace_id[0] = '\0';
    r->allow[0] = r->cache_control[0] = r->retry_after[0] = '\0';
    r->trace_id_count = 0;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct exchange *x = ud;
    size_t n = size * nmemb;
    fg_response *r = x->r;
    if (n >= 5 && memcmp(ptr, "HTTP/", 5) == 0) {
        /* A new response (after a 100 Continue, say): only the last one counts. */
        clear_headers(r);
        x->headers.len = 0;
        if (x->headers.p != NULL)
            x->headers.p[0] = '\0';
    }
    if (buf_add(&x->headers, ptr, n) != 0)
        return 0;
    const char *colon = memchr(ptr, ':', n);
    if (colon == NULL)
        return n;
    size_t name_len = (size_t)(colon - ptr);
    const char *v = colon + 1;
    size_t vn = n - name_len - 1;
    struct {
        const char *name;
        char *dst;
        size_t size;
    } want[] = {
        {"content-type", r->content_type, sizeof r->content_type},
        {"connection", r->connection, sizeof r->connection},
        {"x-tosspayments-trace-id", r->trace_id, sizeof r->trace_id},
        {"allow", r->allow, sizeof r->allow},
        {"cache-control", r->cache_control, sizeof r->cache_control},
        {"retry-after", r->retry_after, sizeof r->retry_after},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (strlen(want[i].name) == name_len && strncasecmp(ptr, want[i].name, name_len) == 0) {
            copy_trimmed(want[i].dst, want[i].size, v, vn);
            if (want[i].dst == r->trace_id)
                r->trace_id_count++;
        }
    }
    return n;
}

static size_t on_upload(char *dst, size_t size, size_t nitems, void *ud)
{
    struct exchange *x = ud;
    size_t n = size * nitems;
    /* Small pieces, so that the body really goes out as several chunks. */
    if (n > 64)
        n = 64;
    if (n > x->upload_left)
        n = x->upload_left;
    memcpy(dst, x->upload, n);
    x->upload += n;
    x->upload_left -= n;
    return n;
}

static bool has_header(const char *const *headers, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        if (strncasecmp(headers[i], name, nl) == 0 &&
            (headers[i][nl] == ':' || headers[i][nl] == ';'))
            return true;
    return false;
}

void fg_response_fini(fg_response *r)
{
    free(r->body);
    free(r->header_block);
    if (r->json != NULL)
        json_decref(r->json);
    memset(r, 0, sizeof *r);
}

int fg_http(const fg_server *s, CURL *h, const fg_request *req, fg_response *out)
{
    pthread_once(&curl_once, curl_init_once);
    memset(out, 0, sizeof *out);
    struct exchange x = {.r = out};
    struct curl_slist *hl = NULL;
    bool own = h == NULL;
    if (own)
        h = curl_easy_init();
    else
        curl_easy_reset(h);
    if (h == NULL) {
        out->curl_code = CURLE_FAILED_INIT;
        snprintf(out->curl_error, sizeof out->curl_error, "curl_easy_init failed");
        out->body = calloc(1, 1);
        out->header_block = calloc(1, 1);
        return -1;
    }

    char url[FG_PATH_LEN + 64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", s->port, req->path);
    const char *method = req->method != NULL ? req->method : "GET";
    size_t body_len = req->body == NULL ? 0 : (req->body_len != 0 ? req->body_len : strlen(req->body));

    bool ok = true;
    for (size_t i = 0; req->headers != NULL && req->headers[i] != NULL; i++) {
        struct curl_slist *n = curl_slist_append(hl, req->headers[i]);
        ok = ok && n != NULL;
        if (n != NULL)
            hl = n;
    }
    const char *extra[3];
    size_t n_extra = 0;
    if (req->body != NULL && !has_header(req->headers, "Content-Type"))
        extra[n_extra++] = "Content-Type: application/json";
    if (!has_header(req->headers, "Expect"))
        extra[n_extra++] = "Expect:";
    if (req->chunked && !has_header(req->headers, "Transfer-Encoding"))
        extra[n_extra++] = "Transfer-Encoding: chunked";
    for (size_t i = 0; i < n_extra; i++) {
        struct curl_slist *n = curl_slist_append(hl, extra[i]);
        ok = ok && n != NULL;
        if (n != NULL)
            hl = n;
    }
    if (!ok)
        abort();

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms : DEFAULT_HTTP_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, req->forbid_reuse ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, out->curl_error);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    if (req->expect_100_timeout_ms > 0)
        curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, req->expect_100_timeout_ms);

    bool is_post = strcmp(method, "POST") == 0;
    if (strcmp(method, "GET") == 0 && req->body == NULL) {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (req->body != NULL || is_post) {
        curl_easy_setopt(h, CURLOPT_POST, 1L);
        if (req->chunked) {
            x.upload = req->body != NULL ? req->body : "";
            x.upload_left = body_len;
            curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
            curl_easy_setopt(h, CURLOPT_READDATA, &x);
        } else {
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
        }
        if (!is_post)
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    } else {
        curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    }

    out->sent_ns = fg_now_ns();
    out->curl_code = curl_easy_perform(h);
    out->done_ns = fg_now_ns();
    curl_off_t t_start = 0, t_total = 0;
    if (curl_easy_getinfo(h, CURLINFO_STARTTRANSFER_TIME_T, &t_start) == CURLE_OK)
        out->starttransfer_us = (int64_t)t_start;
    if (curl_easy_getinfo(h, CURLINFO_TOTAL_TIME_T, &t_total) == CURLE_OK)
        out->total_us = (int64_t)t_total;
    if (out->curl_code == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
    } else if (out->curl_error[0] == '\0') {
        snprintf(out->curl_error, sizeof out->curl_error, "%s", curl_easy_strerror(out->curl_code));
    }
    /* The handle must not keep pointers into this stack frame. */
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hl);
    if (own)
        curl_easy_cleanup(h);

    out->body = x.body.p != NULL ? x.body.p : calloc(1, 1);
    out->body_len = x.body.len;
    out->header_block = x.headers.p != NULL ? x.headers.p : calloc(1, 1);
    if (out->body == NULL || out->header_block == NULL)
        abort();
    if (out->body_len > 0)
        out->json = json_loadb(out->body, out->body_len, 0, NULL);
    return out->curl_code == CURLE_OK ? 0 : -1;
}

int fg_get(const fg_server *s, const char *path, fg_response *out)
{
    const char *headers[] = {s->auth_header, NULL};
    fg_request req = {.method = "GET", .path = path, .headers = headers};
    return fg_http(s, NULL, &req, out);
}

int fg_confirm_on(const fg_server *s, CURL *h, const char *payment_key, const char *order_id,
                  long long amount, const char *idempotency_key, fg_response *out)
{
    json_t *o = json_pack("{s:s, s:s, s:I}", "paymentKey", payment_key, "orderId", order_id,
                          "amount", (json_int_t)amount);
    char *body = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (body == NULL)
        abort();
    char *idem = NULL;
    if (idempotency_key != NULL) {
        size_t n = strlen(idempotency_key) + sizeof "Idempotency-Key: ";
        idem = malloc(n);
        if (idem == NULL)
            abort();
        snprintf(idem, n, "Idempotency-Key: %s", idempotency_key);
    }
    const char *headers[] = {s->auth_header, idem, NULL};
    fg_request req = {.method = "POST", .path = "/v1/payments/confirm", .body = body,
                      .headers = headers};
    int rc = fg_http(s, h, &req, out);
    free(idem);
    free(body);
    return rc;
}

int fg_confirm(const fg_server *s, const char *payment_key, const char *order_id,
               long long amount, const char *idempotency_key, fg_response *out)
{
    return fg_confirm_on(s, NULL, payment_key, order_id, amount, idempotency_key, out);
}

json_t *fg_admin_payments(const fg_server *s, const char *order_id)
{
    char path[FG_PATH_LEN];
    size_t n = (size_t)snprintf(path, sizeof path, "/__admin/payments");
    if (order_id != NULL) {
        n += (size_t)snprintf(path + n, sizeof path - n, "?orderId=");
        for (const char *p = order_id; *p != '\0' && n + 4 < sizeof path; p++) {
            unsigned char c = (unsigned char)*p;
            if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~')
                path[n++] = (char)c;
            else
                n += (size_t)snprintf(path + n, sizeof path - n, "%%%02X", c);
        }
        path[n] = '\0';
    }
    fg_request req = {.method = "GET", .path = path};
    fg_response r;
    json_t *payments = NULL;
    if (fg_http(s, NULL, &req, &r) == 0 && r.status == 200 && r.json != NULL) {
        json_t *a = json_object_get(r.json, "payments");
        if (json_is_array(a))
            payments = json_incref(a);
    }
    fg_response_fini(&r);
    return payments;
}

/* ---- raw TCP -------------------------------------------------------------------------------- */

static void parse_raw(fg_raw_response *r)
{
    const char *p = r->data;
    const char *end = r->data + r->len;
    while (p < end) {
        const char *hdr_end = strstr(p, "\r\n\r\n");
        if (hdr_end == NULL || strncmp(p, "HTTP/1.", 7) != 0)
            return;
        const char *sp = memchr(p, ' ', (size_t)(hdr_end - p));
        if (sp == NULL)
            return;
        int status = atoi(sp + 1);
        const char *next = hdr_end + 4;
        if (status >= 100 && status < 200) {
            p = next;
            continue;
        }
        r->status = status;
        const char *eol = strstr(p, "\r\n");
        r->headers = eol + 2;
        r->body = next;
        r->body_len = (size_t)(end - next);
        char cl[32];
        if (fg_raw_header(r, "Content-Length", cl, sizeof cl)) {
            size_t want = (size_t)strtoull(cl, NULL, 10);
            if (want < r->body_len)
                r->body_len = want;
        }
        if (r->body_len > 0)
            r->json = json_loadb(r->body, r->body_len, 0, NULL);
        return;
    }
}

int fg_raw_open(const fg_server *s, const void *request, size_t len, char err[FG_ERR_LEN])
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_err(err, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        set_err(err, "connect 127.0.0.1:%d: %s", s->port, strerror(errno));
        close(fd);
        return -1;
    }
    const char *p = request;
    size_t left = len;
    while (left > 0) {
        ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            set_err(err, "send: %s", strerror(errno));
            close(fd);
            return -1;
        }
        p += n;
        left -= (size_t)n;
    }
    return fd;
}

void fg_raw_finish(int fd, int timeout_ms, fg_raw_response *out)
{
    memset(out, 0, sizeof *out);
    struct buf b = {0};
    if (buf_add(&b, "", 0) != 0)
        abort();
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        int64_t wait = deadline - fg_now_ms();
        if (wait <= 0)
            break;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)wait);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        char chunk[4096];
        ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            out->closed = true;
            break;
        }
        if (buf_add(&b, chunk, (size_t)n) != 0)
            abort();
    }
    close(fd);
    out->data = b.p;
    out->len = b.len;
    parse_raw(out);
}

int fg_raw(const fg_server *s, const void *request, size_t len, int timeout_ms,
           fg_raw_response *out, char err[FG_ERR_LEN])
{
    int fd = fg_raw_open(s, request, len, err);
    if (fd < 0) {
        memset(out, 0, sizeof *out);
        out->data = calloc(1, 1);
        if (!out->data)
            abort();
        return -1;
    }
    fg_raw_finish(fd, timeout_ms, out);
    return 0;
}

void fg_raw_response_fini(fg_raw_response *r)
{
    free(r->data);
    if (r->json != NULL)
        json_decref(r->json);
    memset(r, 0, sizeof *r);
}

bool fg_raw_header(const fg_raw_response *r, const char *name, char *buf, size_t size)
{
    if (r->headers == NULL)
        return false;
    size_t nl = strlen(name);
    const char *line = r->headers;
    for (;;) {
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL || eol == line)
            return false;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            copy_trimmed(buf, size, line + nl + 1, (size_t)(eol - line) - nl - 1);
            return true;
        }
        line = eol + 2;
    }
}

/* ---- small helpers -------------------------------------------------------------------------- */

char *fg_base64(const void *data, size_t len, char *buf, size_t size)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *in = data;
    size_t need = (len + 2) / 3 * 4 + 1;
    if (size < need)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        buf[o++] = tbl[(v >> 18) & 63];
        buf[o++] = tbl[(v >> 12) & 63];
        buf[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
        buf[o++] = i + 2 < len ? tbl[v & 63] : '=';
    }
    buf[o] = '\0';
    return buf;
}

char *fg_basic_auth(const char *credentials, char *buf, size_t size)
{
    char b64[512];
    if (fg_base64(credentials, strlen(credentials), b64, sizeof b64) == NULL)
        b64[0] = '\0';
    snprintf(buf, size, "Authorization: Basic %s", b64);
    return buf;
}

const char *fg_json_str(const json_t *obj, const char *key)
{
    if (!json_is_object(obj))
        return NULL;
    return json_string_value(json_object_get(obj, key));
}

const char *fg_error_code(const fg_response *r)
{
    return fg_json_str(r->json, "code");
}

long fg_proc_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long kb = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':' &&
            sscanf(line + n + 1, "%ld kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}
