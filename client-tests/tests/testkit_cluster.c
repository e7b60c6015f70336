/* testkit_cluster.c -- a redis-server, CLUSTER_N fakegate instances on it and nginx in front, for
 * the cluster suite (testkit.h). Everything listens on 127.0.0.1 on a port the kernel just
 * handed out (bind to port 0, read it, close: redis-server and nginx take no port file), is a
 * child of the test's thread (PR_SET_PDEATHSIG: a failing test leaves nothing behind) and is
 * stopped by its pid; each instance keeps its port across a restart, since nginx names it. */
#define _GNU_SOURCE

#include "testkit.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define READY_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 5000
#define PORT_TRIES 5

static const char *const *cluster_args; /* cluster_start's args, for restarts */

/* A loopback port nobody listened on a moment ago, or -1. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    int port = -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* Collect `pid` if it has exited: its status (as fg_wait reports it), or -2 if it still runs. */
static int reap(pid_t pid, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
        if (r < 0)
            return -1;
        if (fg_now_ms() >= deadline)
            return -2;
        fg_pause_ms(2);
    }
}

/* SIGTERM, wait STOP_TIMEOUT_MS, then SIGKILL; returns the exit status. */
static int stop_pid(pid_t pid)
{
    kill(pid, SIGTERM);
    int st = reap(pid, STOP_TIMEOUT_MS);
    if (st == -2) {
        kill(pid, SIGKILL);
        st = reap(pid, STOP_TIMEOUT_MS);
    }
    return st;
}

bool cluster_alive(pid_t pid)
{
    if (pid <= 0)
        return false;
    int st;
    return waitpid(pid, &st, WNOHANG) == 0;
}

/* The file's first 2000 bytes, for failure messages. Caller frees; never NULL. */
static char *head_of(const char *path)
{
    char *out = calloc(1, 2001);
    ck_assert(out != NULL);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        size_t n = fread(out, 1, 2000, f);
        out[n] = '\0';
        fclose(f);
    }
    return out;
}

/* Send one inline command to 127.0.0.1:port on a fresh connection and read the first reply
 * line into buf (without its CRLF). False if it could not connect or nothing came in 1 s. */
static bool redis_command(int port, const char *cmd, char *buf, size_t size)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {.tv_sec = 1};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bool ok = false;
    char line[128];
    int len = snprintf(line, sizeof line, "%s\r\n", cmd);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, line, (size_t)len) == len) {
        ssize_t n = read(fd, buf, size - 1);
        ok = n > 0;
        buf[n > 0 ? n : 0] = '\0';
        buf[strcspn(buf, "\r\n")] = '\0';
    }
    close(fd);
    return ok;
}

static bool redis_pings(int port)
{
    char buf[64];
    return redis_command(port, "PING", buf, sizeof buf) && strcmp(buf, "+PONG") == 0;
}

long cluster_redis_dbsize(const fg_cluster *c)
{
    char buf[64];
    ck_assert_msg(redis_command(c->redis_port, "DBSIZE", buf, sizeof buf) && buf[0] == ':',
                  "DBSIZE on redis-server port %d: no integer reply (%s)", c->redis_port, buf);
    return strtol(buf + 1, NULL, 10);
}

/* Start redis-server on a free port; retried on another port if it exits (the port was taken
 * between free_port and its bind). */
static void start_redis(fg_cluster *c)
{
    char log[FG_PATH_LEN], port_s[16], err[FG_ERR_LEN];
    snprintf(log, sizeof log, "%s/redis.log", c->dir);
    for (int tries = 0; tries < PORT_TRIES; tries++) {
        c->redis_port = free_port();
        ck_assert(c->redis_port > 0);
        snprintf(port_s, sizeof port_s, "%d", c->redis_port);
        const char *argv[] = {"redis-server", "--port", port_s, "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--dir", c->dir,
                              "--daemonize", "no", "--protected-mode", "yes", NULL};
        c->redis_pid = fg_spawn(argv, log, err);
        ck_assert_msg(c->redis_pid > 0, "redis-server: %s (scripts/install-deps cluster)", err);
        int64_t deadline = fg_now_ms() + READY_TIMEOUT_MS;
        while (fg_now_ms() < deadline) {
            if (redis_pings(c->redis_port))
                return;
            if (!cluster_alive(c->redis_pid))
                break;
            fg_pause_ms(5);
        }
        if (cluster_alive(c->redis_pid)) {
            char *l = head_of(log);
            ck_abort_msg("redis-server on port %d answered no PING within %d ms: %s",
                         c->redis_port, READY_TIMEOUT_MS, l);
        }
        c->redis_pid = -1;
    }
    char *l = head_of(log);
    ck_abort_msg("redis-server exited at start %d times; its log: %s", PORT_TRIES, l);
}

/* Start instance i: on port `port`, or on port 0 (the kernel's choice) when port is 0. */
static void start_instance(fg_cluster *c, int i, int port)
{
    const char *argv[80];
    size_t n = 0;
    char port_s[16];
    if (c->store_url[0] != '\0') {
        argv[n++] = "--store";
        argv[n++] = c->store_url;
    }
    for (size_t k = 0; cluster_args != NULL && cluster_args[k] != NULL && n < 76; k++)
        argv[n++] = cluster_args[k];
    if (port > 0) {
        snprintf(port_s, sizeof port_s, "%d", port);
        argv[n++] = "--port"; /* after the harness's --port 0: the last one counts */
        argv[n++] = port_s;
    }
    argv[n] = NULL;
    fg_opts o = {.args = argv};
    char err[FG_ERR_LEN];
    c->inst[i] = fg_start(&o, err);
    ck_assert_msg(c->inst[i] != NULL, "instance %d%s: fg_start: %s", i + 1,
                  port > 0 ? " (restart on its port)" : "", err);
    c->inst_port[i] = c->inst[i]->port;
}

static void write_nginx_conf(const fg_cluster *c, int port, const char *path)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    /* master_process off: one process, so the pid we hold is all of nginx and dies with us. */
    fprintf(f, "%s\nmaster_process off;\ndaemon off;\npid %s/nginx.pid;\n"
            "error_log %s/nginx-error.log warn;\nevents { worker_connections 1024; }\nhttp {\n"
            "    access_log off;\n    client_body_temp_path %s/body;\n"
            "    proxy_temp_path %s/proxy;\n    fastcgi_temp_path %s/fastcgi;\n"
            "    uwsgi_temp_path %s/uwsgi;\n    scgi_temp_path %s/scgi;\n"
            "    upstream fakegate {\n",
            geteuid() == 0 ? "user root;" : "", c->dir, c->dir, c->dir, c->dir, c->dir, c->dir,
            c->dir);
    /* max_fails=0: an injected drop_response is not a sick instance; with nginx's default (1)
     * each one takes its instance out for 10 s, and a few of them take out all three. */
    for (int i = 0; i < CLUSTER_N; i++)
        fprintf(f, "        server 127.0.0.1:%d max_fails=0;\n", c->inst_port[i]);
    fprintf(f, "        keepalive 64;\n    }\n    server {\n"
            "        listen 127.0.0.1:%d;\n        location / {\n"
            "            proxy_pass http://fakegate;\n            proxy_http_version 1.1;\n"
            "            proxy_set_header Connection \"\";\n"
            "            proxy_next_upstream off;\n            proxy_read_timeout 120s;\n"
            "        }\n    }\n}\n", port);
    ck_assert(fclose(f) == 0);
}

static void start_nginx(fg_cluster *c)
{
    char conf[FG_PATH_LEN], log[FG_PATH_LEN], elog[FG_PATH_LEN], err[FG_ERR_LEN];
    snprintf(conf, sizeof conf, "%s/nginx.conf", c->dir);
    snprintf(log, sizeof log, "%s/nginx.out", c->dir);
    snprintf(elog, sizeof elog, "%s/nginx-error.log", c->dir);
    for (int tries = 0; tries < PORT_TRIES; tries++) {
        int port = free_port();
        ck_assert(port > 0);
        write_nginx_conf(c, port, conf);
        const char *argv[] = {"nginx", "-c", conf, "-e", elog, NULL};
        c->nginx_pid = fg_spawn(argv, log, err);
        ck_assert_msg(c->nginx_pid > 0, "nginx: %s (scripts/install-deps cluster)", err);
        c->lb.port = port;
        c->lb.pid = c->nginx_pid;
        c->lb.running = true;
        int64_t deadline = fg_now_ms() + READY_TIMEOUT_MS;
        while (fg_now_ms() < deadline && cluster_alive(c->nginx_pid)) {
            fg_response r;
            fg_request req = {.path = "/healthz", .timeout_ms = 2000, .forbid_reuse = true};
            int rc = fg_http(&c->lb, NULL, &req, &r);
            long st = r.status;
            fg_response_fini(&r);
            if (rc == 0 && st == 200)
                return;
            fg_pause_ms(5);
        }
        char *o = head_of(log), *e = head_of(elog);
        if (cluster_alive(c->nginx_pid))
            ck_abort_msg("nginx on port %d: no 200 for /healthz within %d ms: %s %s", port,
                         READY_TIMEOUT_MS, o, e);
        c->nginx_pid = -1;
        if (strstr(e, "Address already in use") == NULL)
            ck_abort_msg("nginx exited at start: %s %s", o, e);
        free(o);
        free(e);
    }
    ck_abort_msg("nginx: no free port in %d tries", PORT_TRIES);
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    (void)remove(path);
    return 0;
}

/* A failing case leaves through _exit: its processes die with it (PR_SET_PDEATHSIG), its temp
 * dir stays. Dirs are named after the owning pid, so the next start removes those whose owner
 * is gone. */
static void sweep_orphans(const char *base)
{
    DIR *d = opendir(base);
    if (d == NULL)
        return;
    struct dirent *e;
    static const char prefix[] = "fakegate-cluster-";
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0)
            continue;
        char *end;
        long owner = strtol(e->d_name + sizeof prefix - 1, &end, 10);
        if (owner <= 0 || *end != '-' || kill((pid_t)owner, 0) == 0 || errno != ESRCH)
            continue;
        char path[FG_PATH_LEN];
        snprintf(path, sizeof path, "%s/%s", base, e->d_name);
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

fg_cluster *cluster_start(const char *const *args)
{
    fg_cluster *c = calloc(1, sizeof *c);
    ck_assert(c != NULL);
    c->redis_pid = c->nginx_pid = -1;
    cluster_args = args;
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] == '\0')
        base = "/tmp";
    sweep_orphans(base);
    snprintf(c->dir, sizeof c->dir, "%s/fakegate-cluster-%ld-XXXXXX", base, (long)getpid());
    ck_assert_msg(mkdtemp(c->dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(c->lb.auth_header, sizeof c->lb.auth_header, "Authorization: Basic %s",
             "dGVzdF9za19mYWtlZ2F0ZTo="); /* base64("test_sk_fakegate:") */
    c->lb.stdout_fd = -1;

    const char *store = getenv("FAKEGATE_CLUSTER_STORE");
    bool memory = store != NULL && strcmp(store, "memory") == 0;
    ck_assert_msg(store == NULL || store[0] == '\0' || memory || strcmp(store, "redis") == 0,
                  "FAKEGATE_CLUSTER_STORE=%s: use redis (the default) or memory", store);
    start_redis(c);
    if (!memory)
        snprintf(c->store_url, sizeof c->store_url, "redis://127.0.0.1:%d/0", c->redis_port);
    for (int i = 0; i < CLUSTER_N; i++)
        start_instance(c, i, 0);
    start_nginx(c);
    return c;
}

void cluster_kill(fg_cluster *c, int i)
{
    ck_assert(i >= 0 && i < CLUSTER_N && c->inst[i] != NULL);
    ck_assert(fg_kill(c->inst[i], SIGKILL) == 0);
    int st = fg_wait(c->inst[i], STOP_TIMEOUT_MS);
    if (st != 128 + SIGKILL) {
        char *e = fg_server_stderr(c->inst[i]);
        ck_abort_msg("instance %d had exited with status %d before the SIGKILL reached it; its "
                     "stderr: %.1500s", i + 1, st, e);
    }
    fg_free(c->inst[i]);
    c->inst[i] = NULL;
}

void cluster_restart(fg_cluster *c, int i)
{
    ck_assert(i >= 0 && i < CLUSTER_N && c->inst[i] == NULL);
    start_instance(c, i, c->inst_port[i]);
}

void cluster_signal_redis(const fg_cluster *c, int sig)
{
    ck_assert(c->redis_pid > 0 && kill(c->redis_pid, sig) == 0);
}

void cluster_put_profile(const fg_cluster *c, const char *json)
{
    for (int i = 0; i < CLUSTER_N; i++) {
        fg_response r;
        put_profile(c->inst[i], json, &r);
        ck_assert_msg(r.status == 200, "PUT /__admin/profile on instance %d: %ld %s", i + 1,
                      r.status, r.body);
        fg_response_fini(&r);
    }
}

void cluster_free(fg_cluster *c)
{
    if (c == NULL)
        return;
    if (c->nginx_pid > 0)
        stop_pid(c->nginx_pid);
    for (int i = 0; i < CLUSTER_N; i++)
        if (c->inst[i] != NULL)
            stop_server(c->inst[i]);
    if (c->redis_pid > 0) {
        kill(c->redis_pid, SIGCONT);
        stop_pid(c->redis_pid);
    }
    nftw(c->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(c);
}
