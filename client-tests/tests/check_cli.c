/* check_cli.c -- black-box tests of the command line (docs/cli.md §1): `fakegate report` and its
 * exit codes, `fakegate probe --timeout/--port-file`, the built-in profiles (a lone copy of the
 * binary in an empty folder starts), -h/-V, did-you-mean for unknown flags, ranges in value
 * errors, and the start-up message when the port is taken. Servers listen on port 0 and are
 * found through their port file; waits poll a condition with a bound. */
#define _GNU_SOURCE

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "testkit.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static const char *bin(void)
{
    const char *b = getenv("FAKEGATE_BIN");
    return b && *b ? b : "build/fakegate";
}

/* Run the binary with `args` (NULL-terminated); fail the test unless it ran. */
static void run(const char *const *args, int timeout_ms, fg_run_result *rr)
{
    char err[FG_ERR_LEN];
    ck_assert_msg(fg_run(args, timeout_ms, rr, err) == 0, "%s", err);
}

/* A loopback port bound but not listening: connections are refused and nobody else can take
 * it while `*fd` stays open. */
static int refused_port(int *fd)
{
    *fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(*fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(*fd, (struct sockaddr *)&sa, sizeof sa), 0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(*fd, (struct sockaddr *)&sa, &len), 0);
    return ntohs(sa.sin_port);
}

/* Write `port` to `path` as the server does: a temporary file renamed into place. */
static void write_port_file(const char *path, int port)
{
    char tmp[FG_PATH_LEN + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    ck_assert(f != NULL);
    fprintf(f, "%d\n", port);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
}

/* fork + exec `argv` (at most 15 words; through fg_wrapper() when set, as the harness starts
 * its servers) in directory `cwd` (NULL: this one), stdout and stderr to the files given (NULL:
 * /dev/null). The child dies with this thread (PR_SET_PDEATHSIG). */
static pid_t spawn_in(const char *cwd, const char *const *argv, const char *out, const char *err)
{
    const char *wrapped[17];
    if (fg_wrapper() != NULL) {
        size_t n = 0;
        wrapped[n++] = fg_wrapper();
        for (size_t i = 0; argv[i] != NULL; i++) {
            ck_assert(n < 16);
            wrapped[n++] = argv[i];
        }
        wrapped[n] = NULL;
        argv = wrapped;
    }
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int o = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int e = open(err ? err : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int in = open("/dev/null", O_RDONLY);
        if (o < 0 || e < 0 || in < 0 || (cwd && chdir(cwd) != 0))
            _exit(126);
        dup2(in, 0), dup2(o, 1), dup2(e, 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Wait at most timeout_ms for `pid` to exit: its exit code, 128+signal, or -1 on timeout. */
static int wait_exit(pid_t pid, int timeout_ms)
{
    int64_t deadline = fg_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (fg_now_ms() >= deadline)
            return -1;
        fg_pause_ms(1);
    }
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    static char empty[] = "";
    if (!f)
        return strdup(empty);
    char *buf = calloc(1, 1 << 16);
    ck_assert(buf != NULL);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- fakegate report ---------------------------------------------------------------------- */

START_TEST(test_report_exits_0_and_says_no_findings_for_a_clean_client)
{
    fg_server *s = start_server(NULL);
    fg_response r;
    confirm_fresh(s, "pk_clean_1", "order-clean-1", 1000, "clean-1", 0, &r);
    assert_done(&r, "pk_clean_1", "order-clean-1");
    fg_response_fini(&r);
    const char *args[] = {"report", "--port-file", s->port_file, NULL};
    fg_run_result rr;
    run(args, 10000, &rr);
    ck_assert_msg(rr.exit_status == 0, "report exit %d; stdout: %s; stderr: %s", rr.exit_status,
                  rr.out, rr.err);
    ck_assert_msg(strstr(rr.out, "no findings") != NULL, "stdout: %s", rr.out);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

START_TEST(test_report_exits_1_and_prints_the_finding_after_a_retried_4xx)
{
    fg_server *s = start_server(NULL);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    /* The same invalid confirm twice: the second is a retry of a 4xx. */
    for (int i = 0; i < 2; i++) {
        fg_response r;
        confirm_fresh(s, "pk_retry_4xx", "order-retry-4xx", -5, "retry-4xx", 0, &r);
        assert_status(&r, 400);
        fg_response_fini(&r); /* judged when sent, before we read it (docs/admin.md §5) */
    }
    const char *args[] = {"report", "--port", port, NULL};
    fg_run_result rr;
    run(args, 10000, &rr);
    ck_assert_msg(rr.exit_status == 1, "report exit %d; stdout: %s; stderr: %s", rr.exit_status,
                  rr.out, rr.err);
    ck_assert_msg(strstr(rr.out, "1 finding") && strstr(rr.out, "retried_4xx: 1 time") &&
                      strstr(rr.out, "rule") && strstr(rr.out, "threshold") &&
                      strstr(rr.out, "order-retry-4xx"),
                  "stdout: %s", rr.out);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

START_TEST(test_report_exits_2_when_no_server_answers)
{
    int fd;
    char port[16];
    snprintf(port, sizeof port, "%d", refused_port(&fd));
    const char *args[] = {"report", "--port", port, NULL};
    fg_run_result rr;
    run(args, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2, "report exit %d; stderr: %s", rr.exit_status, rr.err);
    ck_assert_msg(strstr(rr.err, "no server") != NULL, "stderr: %s", rr.err);
    fg_run_result_fini(&rr);
    close(fd);

    /* A port file that does not exist (the server never started) is no server either. */
    const char *args2[] = {"report", "--port-file", "/nonexistent/fakegate.port", NULL};
    run(args2, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2, "report exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
}
END_TEST

START_TEST(test_report_sends_the_admin_token_and_exits_2_without_it)
{
    const char *sargs[] = {"--admin-token", "s3cret", NULL};
    fg_server *s = start_args(NULL, sargs);
    const char *without[] = {"report", "--port-file", s->port_file, NULL};
    fg_run_result rr;
    run(without, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "401") && strstr(rr.err, "--admin-token"),
                  "report without the token: exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    const char *with[] = {"report", "--port-file", s->port_file, "--admin-token", "s3cret", NULL};
    run(with, 10000, &rr);
    ck_assert_msg(rr.exit_status == 0, "report with the token: exit %d; stderr: %s",
                  rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    stop_server(s);
}
END_TEST

/* ---- fakegate probe ----------------------------------------------------------------------- */

START_TEST(test_probe_timeout_gives_up_with_1_within_the_timeout)
{
    int fd;
    char port[16];
    snprintf(port, sizeof port, "%d", refused_port(&fd));
    const char *args[] = {"probe", "--port", port, "--timeout", "1.5", NULL};
    fg_run_result rr;
    int64_t t0 = fg_now_ms();
    run(args, 10000, &rr);
    int64_t took = fg_now_ms() - t0;
    ck_assert_msg(rr.exit_status == 1, "probe exit %d; stderr: %s", rr.exit_status, rr.err);
    /* It retried for the whole timeout, and stopped at it. */
    ck_assert_msg(took >= 1400 && took < 2500, "probe --timeout 1.5 took %lld ms", (long long)took);
    ck_assert_msg(strstr(rr.err, "no healthy server") != NULL, "stderr: %s", rr.err);
    fg_run_result_fini(&rr);
    close(fd);
}
END_TEST

/* The probe starts first, against a port file naming a refused port; once the server is up and
 * the file names its port, the probe exits 0 at its next attempt. */
START_TEST(test_probe_waits_for_a_server_that_starts_after_it)
{
    char dir[] = "/tmp/fakegate-probe-XXXXXX", pf[FG_PATH_LEN];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(pf, sizeof pf, "%s/fg.port", dir);
    int fd;
    write_port_file(pf, refused_port(&fd));
    const char *argv[] = {bin(), "probe", "--port-file", pf, "--timeout", "20", NULL};
    pid_t probe = spawn_in(NULL, argv, NULL, NULL);
    /* A probe that asks once has given up long before this. */
    ck_assert_msg(wait_exit(probe, 300) == -1, "probe exited before any server started");
    fg_server *s = start_server(NULL);
    int64_t t0 = fg_now_ms();
    write_port_file(pf, s->port);
    int st = wait_exit(probe, 5000);
    int64_t took = fg_now_ms() - t0;
    if (st == -1) {
        kill(probe, SIGKILL);
        waitpid(probe, NULL, 0);
    }
    ck_assert_msg(st == 0, "probe exit %d", st);
    ck_assert_msg(took < 1000, "probe answered %lld ms after the server was up", (long long)took);
    unlink(pf);
    rmdir(dir);
    close(fd);
    stop_server(s);
}
END_TEST

START_TEST(test_probe_usage_errors_exit_2_naming_the_flag)
{
    static const char *const cases[][6] = {
        {"probe", "--timeout", "-1", NULL},
        {"probe", "--timeout", "soon", NULL},
        {"probe", "--port", "8080", "--port-file", "/tmp/x", NULL},
        {"probe", "--tiemout", "1", NULL},
    };
    static const char *const needle[] = {"--timeout", "--timeout", "--port-file",
                                         "did you mean --timeout?"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fg_run_result rr;
        run(cases[i], 10000, &rr);
        ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, needle[i]) != NULL,
                      "case %zu: exit %d; stderr: %s", i, rr.exit_status, rr.err);
        fg_run_result_fini(&rr);
    }
}
END_TEST

/* ---- built-in profiles -------------------------------------------------------------------- */

/* A copy of the binary alone in an empty folder (cwd there, no profiles anywhere near it) starts
 * with `normal`, answers a confirm, switches to a shipped name and validates one. */
START_TEST(test_lone_binary_starts_with_builtin_normal_and_confirms)
{
    char root[] = "/tmp/fakegate-lone-XXXXXX";
    ck_assert(mkdtemp(root) != NULL);
    char dir[FG_PATH_LEN], exe[FG_PATH_LEN + 16], pf[FG_PATH_LEN + 16], out[FG_PATH_LEN],
        err[FG_PATH_LEN];
    snprintf(dir, sizeof dir, "%s/a", root);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(dir, sizeof dir, "%s/a/b", root); /* <bindir>/.. is ours too, and empty */
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(exe, sizeof exe, "%s/fakegate", dir);
    snprintf(pf, sizeof pf, "%s/port", dir);
    snprintf(out, sizeof out, "%s/stdout", root);
    snprintf(err, sizeof err, "%s/stderr", root);
    FILE *src = fopen(bin(), "rb"), *dst = fopen(exe, "wb");
    ck_assert(src && dst);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, src)) > 0;)
        ck_assert_uint_eq(fwrite(buf, 1, n, dst), n);
    fclose(src);
    ck_assert_int_eq(fclose(dst), 0);
    ck_assert_int_eq(chmod(exe, 0700), 0);

    const char *argv[] = {"./fakegate", "--port", "0", "--port-file", "port", "--quiet", NULL};
    pid_t pid = spawn_in(dir, argv, out, err);
    /* As long as the harness waits for a server (harness.h: 6 times as long when wrapped). */
    int64_t deadline = fg_now_ms() + (fg_wrapper() != NULL ? 60000 : 10000);
    struct stat st;
    while (stat(pf, &st) != 0 || st.st_size == 0) {
        if (wait_exit(pid, 0) != -1 || fg_now_ms() > deadline) {
            char *e = slurp(err);
            ck_abort_msg("the lone binary did not start; stderr: %s", e);
        }
        fg_pause_ms(5);
    }
    fg_server s;
    memset(&s, 0, sizeof s);
    FILE *f = fopen(pf, "r");
    ck_assert(f && fscanf(f, "%d", &s.port) == 1);
    fclose(f);
    fg_basic_auth(FG_DEFAULT_SECRET_KEY ":", s.auth_header, sizeof s.auth_header);
    /* The port file is written before the ready line is printed: wait for the whole line. */
    char *ready = slurp(out);
    while (strchr(ready, '\n') == NULL) {
        ck_assert_msg(wait_exit(pid, 0) == -1 && fg_now_ms() <= deadline,
                      "no ready line after the port file; stdout: %s", ready);
        free(ready);
        fg_pause_ms(5);
        ready = slurp(out);
    }
    ck_assert_msg(strstr(ready, " profile=normal ") != NULL, "ready line: %s", ready);
    free(ready);

    fg_response r;
    confirm_fresh(&s, "pk_lone_1", "order-lone-1", 15000, "lone-1", 0, &r);
    assert_done(&r, "pk_lone_1", "order-lone-1");
    fg_response_fini(&r);
    put_profile(&s, "{\"name\": \"slow\"}", &r);
    assert_status(&r, 200);
    fg_response_fini(&r);
    put_profile(&s, "{\"name\": \"slwo\"}", &r);
    assert_error(&r, 400, "INVALID_PROFILE");
    /* The names that exist, never the server's directories. */
    const char *msg = fg_json_str(r.json, "message");
    ck_assert_msg(msg && strstr(msg, "did you mean \"slow\"") && strstr(msg, "lossy") &&
                      !strchr(msg, '/'),
                  "message: %s", msg ? msg : r.body);
    fg_response_fini(&r);

    const char *check[] = {"./fakegate", "--check-profile", "slow", NULL};
    char cout[FG_PATH_LEN];
    snprintf(cout, sizeof cout, "%s/check.out", root);
    pid_t c = spawn_in(dir, check, cout, NULL);
    ck_assert_int_eq(wait_exit(c, 10000), 0);
    char *co = slurp(cout);
    ck_assert_msg(strstr(co, "slow: ok (profile slow, built in)") != NULL, "stdout: %s", co);
    free(co);

    kill(pid, SIGTERM);
    ck_assert_int_eq(wait_exit(pid, 5000), 0);
    unlink(cout), unlink(out), unlink(err), unlink(exe);
    snprintf(dir, sizeof dir, "%s/a/b", root);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/a", root);
    rmdir(dir);
    rmdir(root);
}
END_TEST

START_TEST(test_check_profile_takes_a_name)
{
    const char *ok[] = {"--check-profile", "slow", NULL};
    fg_run_result rr;
    run(ok, 10000, &rr);
    ck_assert_msg(rr.exit_status == 0 && strstr(rr.out, "slow: ok (profile slow"),
                  "exit %d; stdout: %s; stderr: %s", rr.exit_status, rr.out, rr.err);
    fg_run_result_fini(&rr);
    const char *bad[] = {"--check-profile", "slwo", NULL};
    run(bad, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "did you mean \"slow\"?") &&
                      strstr(rr.err, "throttled"),
                  "exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
}
END_TEST

/* ---- flags -------------------------------------------------------------------------------- */

START_TEST(test_short_h_and_V_are_help_and_version)
{
    fg_run_result h, help, v, version;
    const char *a1[] = {"-h", NULL}, *a2[] = {"--help", NULL}, *a3[] = {"-V", NULL},
               *a4[] = {"--version", NULL};
    run(a1, 10000, &h), run(a2, 10000, &help), run(a3, 10000, &v), run(a4, 10000, &version);
    ck_assert_int_eq(h.exit_status, 0);
    ck_assert_int_eq(v.exit_status, 0);
    ck_assert_msg(strncmp(h.out, "usage: fakegate", 15) == 0, "-h: %s", h.out);
    ck_assert_str_eq(h.out, help.out);
    ck_assert_msg(strncmp(v.out, "fakegate ", 9) == 0, "-V: %s", v.out);
    ck_assert_str_eq(v.out, version.out);
    fg_run_result_fini(&h), fg_run_result_fini(&help), fg_run_result_fini(&v);
    fg_run_result_fini(&version);
}
END_TEST

START_TEST(test_unknown_flag_exits_2_with_a_suggestion)
{
    const char *args[] = {"--thraeds", "4", NULL};
    fg_run_result rr;
    run(args, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "unknown option '--thraeds'") &&
                      strstr(rr.err, "did you mean --threads?"),
                  "exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
    const char *sub[] = {"prob", NULL};
    run(sub, 10000, &rr);
    ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, "did you mean fakegate probe?"),
                  "exit %d; stderr: %s", rr.exit_status, rr.err);
    fg_run_result_fini(&rr);
}
END_TEST

START_TEST(test_value_out_of_range_names_the_range)
{
    static const char *const cases[][3] = {
        {"--threads", "0", "--threads 0: must be 1-64"},
        {"--port", "70000", "--port 70000: must be 0-65535"},
        {"--idle-timeout", "86401", "--idle-timeout 86401: must be 0-86400"},
        {"--log", "xml", "--log xml: must be text or json"},
        {"--max-idempotency-records", "0", "--max-idempotency-records 0: must be 1-4294967295"},
        {"--max-payments", "4294967296", "--max-payments 4294967296: must be 1-4294967295"},
        {"--journal-size", "0", "--journal-size 0: must be 1-1000000"},
        {"--journal-size", "1000001", "--journal-size 1000001: must be 1-1000000"},
        {"--cluster-journal-max", "0", "--cluster-journal-max 0: must be 1-10000000"},
        {"--cluster-journal-max", "10000001", "--cluster-journal-max 10000001: must be 1-10000000"},
        {"--cluster-journal-max", "500", "--cluster-journal-max 500: only with --store redis://"},
        {"--max-connections", "0", "--max-connections 0: must be 1-1048576"},
        {"--max-json-depth", "2049", "--max-json-depth 2049: must be 1-2048"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *args[] = {cases[i][0], cases[i][1], NULL};
        fg_run_result rr;
        run(args, 10000, &rr);
        ck_assert_msg(rr.exit_status == 2 && strstr(rr.err, cases[i][2]),
                      "%s %s: exit %d; stderr: %s", cases[i][0], cases[i][1], rr.exit_status,
                      rr.err);
        fg_run_result_fini(&rr);
    }
}
END_TEST

/* A taken port: one message, fakegate's, naming the address and the reason; nothing from
 * libmicrohttpd contradicting it (it would say "port 0"). */
START_TEST(test_port_in_use_says_so_once)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    ck_assert_int_eq(listen(fd, 1), 0);
    socklen_t len = sizeof sa;
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    char port[16], want[64];
    snprintf(port, sizeof port, "%d", (int)ntohs(sa.sin_port));
    snprintf(want, sizeof want, "fakegate: cannot listen on 127.0.0.1:%s: ", port);
    const char *args[] = {"--port", port, "--profile", "normal", NULL};
    fg_run_result rr;
    run(args, 10000, &rr);
    ck_assert_msg(rr.exit_status == 1, "exit %d; stderr: %s", rr.exit_status, rr.err);
    ck_assert_msg(strncmp(rr.err, want, strlen(want)) == 0 && !strstr(rr.err, "libmicrohttpd"),
                  "stderr: %s", rr.err);
    fg_run_result_fini(&rr);
    close(fd);
}
END_TEST

/* --host beyond loopback warns, even with --quiet, naming what the admin API lets anyone do;
 * loopback does not (docs/cli.md §1). The server is reached on 127.0.0.1 only. */
START_TEST(test_host_beyond_loopback_warns_about_the_admin_api)
{
    const char *open_args[] = {"--host", "0.0.0.0", NULL};
    fg_server *s = start_args(NULL, open_args);
    char *err = fg_server_stderr(s);
    ck_assert_msg(strstr(err, "warning: --host 0.0.0.0 is not loopback") != NULL, "%s", err);
    ck_assert_msg(strstr(err, "reset everything through /__admin/") != NULL, "%s", err);
    free(err);
    stop_server(s);
    const char *token_args[] = {"--host", "0.0.0.0", "--admin-token", "t0k", NULL};
    s = start_args(NULL, token_args);
    err = fg_server_stderr(s);
    ck_assert_msg(strstr(err, "/__admin/ needs the --admin-token") != NULL, "%s", err);
    free(err);
    stop_server(s);
    const char *loop_args[] = {"--host", "127.0.0.1", NULL}; /* a bare root may not know "localhost" */
    s = start_args(NULL, loop_args);
    err = fg_server_stderr(s);
    ck_assert_msg(strstr(err, "warning") == NULL, "%s", err);
    free(err);
    stop_server(s);
}
END_TEST

Suite *make_suite(void)
{
    Suite *su = suite_create("blackbox_cli");
    TCase *tc = add_tcase(su, "report", 30);
    tcase_add_test(tc, test_report_exits_0_and_says_no_findings_for_a_clean_client);
    tcase_add_test(tc, test_host_beyond_loopback_warns_about_the_admin_api);
    tcase_add_test(tc, test_report_exits_1_and_prints_the_finding_after_a_retried_4xx);
    tcase_add_test(tc, test_report_exits_2_when_no_server_answers);
    tcase_add_test(tc, test_report_sends_the_admin_token_and_exits_2_without_it);

    tc = add_tcase(su, "probe", 30);
    tcase_add_test(tc, test_probe_waits_for_a_server_that_starts_after_it);
    tcase_add_test(tc, test_probe_usage_errors_exit_2_naming_the_flag);

    tc = add_tcase(su, "builtin_profiles", 30);
    tcase_add_test(tc, test_lone_binary_starts_with_builtin_normal_and_confirms);
    tcase_add_test(tc, test_check_profile_takes_a_name);

    tc = add_tcase(su, "flags", 30);
    tcase_add_test(tc, test_short_h_and_V_are_help_and_version);
    tcase_add_test(tc, test_unknown_flag_exits_2_with_a_suggestion);
    tcase_add_test(tc, test_value_out_of_range_names_the_range);
    tcase_add_test(tc, test_port_in_use_says_so_once);
    /* Bounds on wall-clock time: not under make memcheck (testkit.h). */
    tc = add_timing_tcase(su, "probe_timing", 30);
    tcase_add_test(tc, test_probe_timeout_gives_up_with_1_within_the_timeout);
    return su;
}
