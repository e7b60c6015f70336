/* subcmd.h -- the client subcommands of the fakegate binary, for scripts and CI steps that have
 * no curl or jq (docs/cli.md §1): `fakegate probe` waits for a server's health check and
 * `fakegate report` prints the verdict of GET /__admin/report. Both talk to a running server over
 * cli_http.h and never start one. */
#ifndef FAKEGATE_SUBCMD_H
#define FAKEGATE_SUBCMD_H

/* The subcommand named `word` ("probe", "report"), or NULL if there is none. */
typedef int (*subcmd_fn)(int argc, char **argv);
subcmd_fn subcmd_find(const char *word);

/* NULL-terminated list of the subcommand names, for did-you-mean. Static storage. */
extern const char *const subcmd_names[];

/* fakegate probe [--host ADDR] [--port N | --port-file PATH] [--timeout SECONDS]: GET /healthz
 * until it answers 200 or --timeout seconds (fractional; default 0: ask once) have passed; each
 * attempt waits at most 2 s and never past the timeout. `argv[0]` is the program, `argv[1]`
 * "probe". Returns the exit code: 0 healthy (silently), 1 no healthy server in time (one line on
 * stderr saying why), 2 usage error naming the flag. Thread: main. */
int subcmd_probe(int argc, char **argv);

/* fakegate report [--host ADDR] [--port N | --port-file PATH] [--admin-token TOKEN]
 * [--tenant KEY]: GET /__admin/report (at most 30 s; with X-Fakegate-Tenant: KEY, that tenant's
 * report, docs/tenants.md §9) and print its findings as text on stdout. Returns the exit code: 0
 * no findings, 1 findings, 2 no server answered, the answer was not a 200 report (then the
 * server's message is printed: an unknown tenant's 404 says so), or a usage error. Thread:
 * main. */
int subcmd_report(int argc, char **argv);

#endif
