/* startlat -- start-to-ready time of a server, for `make bench` (bench/run.sh).
 *
 *   startlat -n RUNS (--port-file FILE | --port PORT) -- COMMAND [ARGS...]
 *
 * Each run: take the monotonic time, fork and exec COMMAND, then
 *   --port-file: poll (every 50 us) until FILE exists with a port number in it (the server writes
 *                it atomically with a rename), note that time, then
 *   both:        connect to 127.0.0.1:PORT and send "GET /healthz" (Connection: close) until the
 *                answer's status line is 200, polling every 50 us while the connection is refused;
 * the time of that first 200 is the run's figure. Then SIGTERM, waitpid, and the next run.
 * Prints one JSON line: {"runs_ms":[... in run order],"median_ms":M,"port_file_median_ms":P|null}.
 * Exits 1 if a run does not get a 200 within 10 s.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000L};
    nanosleep(&ts, NULL);
}

/* Port number from the port file, or 0 while it is not there yet. */
static int read_port_file(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    char buf[32];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    int port = atoi(buf);
    return port > 0 && port < 65536 ? port : 0;
}

/* 1 if GET /healthz answered 200, 0 if not (refused, reset, other status). */
static int healthz_200(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                  "Connection: close\r\n\r\n";
        if (write(fd, req, sizeof req - 1) == (ssize_t)(sizeof req - 1)) {
            char buf[64];
            size_t got = 0;
            while (got < 12) {
                ssize_t n = read(fd, buf + got, sizeof buf - 1 - got);
                if (n <= 0)
                    break;
                got += (size_t)n;
            }
            buf[got] = '\0';
            ok = got >= 12 && strncmp(buf, "HTTP/1.", 7) == 0 && strncmp(buf + 9, "200", 3) == 0;
        }
    }
    close(fd);
    return ok;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median of v[0..n) without reordering v. */
static double median(const double *v, int n)
{
    double *c = malloc((size_t)n * sizeof *c);
    if (!c)
        return -1;
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : (c[n / 2 - 1] + c[n / 2]) / 2;
    free(c);
    return m;
}

int main(int argc, char **argv)
{
    int runs = 20, port = 0, i;
    const char *port_file = NULL;
    for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (strcmp(argv[i], "-n") == 0 && i + 1 < argc)
            runs = atoi(argv[++i]);
        else if (strcmp(argv[i], "--port-file") == 0 && i + 1 < argc)
            port_file = argv[++i];
        else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
            port = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: startlat -n RUNS (--port-file FILE | --port PORT) -- CMD...\n");
            return 2;
        }
    }
    if (i + 1 >= argc || runs < 1 || runs > 1000 || (!port_file && port <= 0)) {
        fprintf(stderr, "usage: startlat -n RUNS (--port-file FILE | --port PORT) -- CMD...\n");
        return 2;
    }
    char **cmd = argv + i + 1;
    double *ready = calloc((size_t)runs, sizeof *ready);
    double *pf = calloc((size_t)runs, sizeof *pf);
    if (!ready || !pf)
        return 1;
    for (int r = 0; r < runs; r++) {
        if (port_file)
            unlink(port_file);
        double t0 = now_ms();
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            int devnull = open("/dev/null", O_RDWR);
            if (devnull >= 0) {
                dup2(devnull, 1);
                dup2(devnull, 2);
            }
            execvp(cmd[0], cmd);
            _exit(127);
        }
        int p = port, failed = 0;
        if (port_file) {
            while ((p = read_port_file(port_file)) == 0) {
                if (now_ms() - t0 > 10000) {
                    failed = 1;
                    break;
                }
                pause_us(50);
            }
            pf[r] = now_ms() - t0;
        }
        while (!failed && !healthz_200(p)) {
            if (now_ms() - t0 > 10000)
                failed = 1;
            else
                pause_us(50);
        }
        ready[r] = now_ms() - t0;
        kill(pid, SIGTERM);
        int st;
        waitpid(pid, &st, 0);
        if (failed) {
            fprintf(stderr, "startlat: run %d: no 200 on /healthz within 10 s\n", r + 1);
            return 1;
        }
    }
    printf("{\"runs_ms\":[");
    for (int r = 0; r < runs; r++)
        printf("%s%.2f", r ? "," : "", ready[r]);
    printf("],\"median_ms\":%.2f,\"port_file_median_ms\":", median(ready, runs));
    if (port_file)
        printf("%.2f}\n", median(pf, runs));
    else
        printf("null}\n");
    return 0;
}
