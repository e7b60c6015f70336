# fakegate -- build, run and test. `make help` prints this list of every target.
#   make, make all        build build/fakegate
#   make run              build and start on 127.0.0.1:8080 with the `normal` profile
#   make test             every Check suite (server/tests) and black-box test (client-tests);
#                         ends with "N passed, M failed"
#   make test SANITIZE=1  the same under AddressSanitizer + UndefinedBehaviorSanitizer (build/san)
#   make test SANITIZE=thread  the unit and black-box suites under ThreadSanitizer, the server
#                         too (build/tsan; not the browser test); fails on any race reported
#   make memcheck         the black-box suites with every server under valgrind memcheck; fails
#                         on any memory error or definite/indirect leak (logs: build/memcheck-logs)
#   make clean            remove build/ (objects, binaries, the container and fresh-test caches)
#   make docker           build the container image fakegate:latest (docker/)
#   make docker-test      build the image, run it and smoke-test it
#   make fresh-test       the README's `make run` and `make test` in a fresh Debian bookworm
#                         root file system that has only make (root; docker/fresh-test.sh)
#   make experiments [SCALE=0.1] [ONLY=E4]   the experiments E1-E4; writes client-tests/RESULTS.md
#                         and its figures client-tests/e1.svg, e2.svg, e3.svg (gnuplot)
#   make bench            fakegate against nginx and a bare libmicrohttpd server; BENCHMARKS.md
#   make callgrind        instructions per confirm and per replay under valgrind's callgrind
#                         (bench/callgrind.sh; CG_N=2000 requests each): judges a change to the
#                         request path on a loaded machine, where wrk's figures move
#   make stress [STRESS_REQUESTS=N]   10^6 confirms, resends, cancels and reads from 32 threads
#                         under a lossy profile with resets, the ledger checked (not in make test)
#   make soak [SOAK_SECONDS=N]   10 minutes of paced fresh-key load with 30 s TTLs; fails if
#                         fakegate's RSS grows more than 10 % after a warm-up of 2 TTLs (not in
#                         make test)
#   make crash-test       SIGKILL fakegate 20 times mid-load, restart it on its --state-file,
#                         compare the ledger with every answer (not in make test; a small form is)
#   make cluster-test [CLUSTER_STRESS=N]   redis-server, three fakegate instances sharing it
#                         (--store redis://...) and nginx in front, on free loopback ports, and
#                         the cluster suite (client-tests/tests/check_cluster.c) against them:
#                         one key raced over the instances, a lost response replayed elsewhere,
#                         attempts counted cluster-wide, the profile in force, `times` budgets,
#                         a throttle, a cap and the processing mark shared, a 10^4-request
#                         stress through nginx with an instance killed (CLUSTER_STRESS=100000:
#                         the full 10^5), Redis stopped (not in make test)
#   make interop          got, axios-retry, fetch-retry, p-retry, cockatiel, opossum, urllib3,
#                         requests, tenacity, curl --retry, libcurl and the Toss SDK
#                         toss-payments-server-api against fakegate
#                         (client-tests/interop); one line per case, "N passed, M failed"
#   make fuzz [SECONDS=60]  each libFuzzer harness (server/tests/fuzz) for SECONDS seconds, with
#                         clang under ASan + UBSan (build/fuzz); fails on any finding
#   make install          install the binary and the shipped profiles (PREFIX=/usr/local,
#                         DESTDIR=)
#   make uninstall        remove what `make install` installed (the same PREFIX and DESTDIR)
#   make deps             install what the goals miss (the targets above run it first)
#   make help             this list
# On a fresh Debian or Ubuntu machine `make`, `make run` and `make test` install the packages
# they miss first (scripts/install-deps, as root or through sudo; NO_INSTALL=1: only say what).
# `make run ARGS='--profile lossy --seed 7'` passes flags; FAKEGATE_* variables work too.

CC        ?= cc
SANITIZE  ?= 0
ifeq ($(SANITIZE),1)
BUILD     := build/san
SANFLAGS  := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
else ifeq ($(SANITIZE),thread)
BUILD     := build/tsan
SANFLAGS  := -fsanitize=thread -fno-omit-frame-pointer
else ifeq ($(SANITIZE),0)
BUILD     := build
SANFLAGS  :=
else
$(error SANITIZE=$(SANITIZE): use 1 (address + undefined) or thread)
endif

WARN      := -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wstrict-prototypes \
             -Wmissing-prototypes -Wformat=2 -Werror
# assert() states invariants (charges <= 1, a record completed only by its owner, a connection
# in the scheduler only while suspended) and stays on in every build: never -DNDEBUG.
CFLAGS    ?= -O2 -g
# pkg-config modules: the server's (libcurl sends its webhooks, hiredis reaches --store redis://),
# and what only the tests add.
SRV_PKGS  := libmicrohttpd jansson libcurl hiredis
TEST_PKGS := check
ALL_CFLAGS = -std=c11 $(WARN) $(CFLAGS) $(SANFLAGS) -MMD -MP -pthread \
             $(shell pkg-config --cflags $(SRV_PKGS) 2>/dev/null)
LDLIBS_SRV = $(shell pkg-config --libs $(SRV_PKGS) 2>/dev/null) -lm -pthread
LDLIBS_CHK = $(shell pkg-config --libs check 2>/dev/null)
LDLIBS_CURL= $(shell pkg-config --libs libcurl jansson 2>/dev/null)

SRV_SRC   := $(wildcard server/src/*.c)
SRV_OBJ   := $(SRV_SRC:%.c=$(BUILD)/obj/%.o)
LIB_OBJ   := $(filter-out $(BUILD)/obj/server/src/main.o,$(SRV_OBJ))
# Test binaries: one per server/tests/check_*.c (unit) and client-tests/tests/check_*.c
# (black-box). Each file defines make_suite(); the one main() is server/tests/check_main.c,
# linked into every test binary. Black-box binaries also link the testkit (testkit*.c).
CHECK_MAIN:= $(BUILD)/obj/server/tests/check_main.o
UNIT_SRC  := $(filter-out server/tests/check_main.c,$(wildcard server/tests/check_*.c))
UNIT_BIN  := $(UNIT_SRC:server/tests/%.c=$(BUILD)/tests/%)
CT_LIB_SRC:= $(filter-out client-tests/tests/%,$(wildcard client-tests/*.c))
CT_LIB_OBJ:= $(CT_LIB_SRC:%.c=$(BUILD)/obj/%.o)
KIT_OBJ   := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard client-tests/tests/testkit*.c))
# check_cluster needs redis-server and nginx: `make cluster-test` runs it, `make test` does not.
CLUSTER_SRC := client-tests/tests/check_cluster.c
BB_SRC    := $(filter-out $(CLUSTER_SRC),$(wildcard client-tests/tests/check_*.c))
BB_BIN    := $(BB_SRC:client-tests/tests/%.c=$(BUILD)/client-tests/%)

# Object files are not intermediates: keep them, so a second `make` relinks nothing.
.SECONDARY:

.PHONY: all run test clean deps help
all: deps $(BUILD)/fakegate

# The header comment of this file, from line 2 to the first blank line.
help:
	@sed -n '2,/^$$/p' Makefile | sed -e '/^$$/d' -e 's/^# \{0,1\}//'

# What the goals need, before anything compiles (every object waits for it, also under -j):
# the server's packages, or the tests' too when a goal builds tests (they include gnuplot and
# jq: make experiments and check_experiments draw the experiments' figures). scripts/install-deps
# holds the one package list, tells what is present and installs what is missing (apt-get
# update, then apt-get install: as root, through sudo, or it prints the command and stops).
DEPS_SET  := server
ifneq ($(filter test experiments build/tests/% build/client-tests/% build/san/% build/tsan/%,$(MAKECMDGOALS)),)
DEPS_SET  := test
endif
ifneq ($(filter interop,$(MAKECMDGOALS)),)
DEPS_SET  := interop
endif
ifneq ($(filter callgrind,$(MAKECMDGOALS)),)
DEPS_SET  := callgrind
endif
ifneq ($(filter cluster-test,$(MAKECMDGOALS)),)
DEPS_SET  := cluster
endif
ifneq ($(filter memcheck,$(MAKECMDGOALS)),)
DEPS_SET  := memcheck
endif
VALGRIND_GOALS := $(filter memcheck callgrind,$(MAKECMDGOALS))
ifneq ($(VALGRIND_GOALS),)
ifneq ($(SANITIZE),0)
$(error make $(VALGRIND_GOALS) runs the plain build: valgrind cannot run a sanitizer build (SANITIZE=0))
endif
endif
deps:
	@scripts/install-deps $(DEPS_SET)

$(BUILD)/fakegate: $(SRV_OBJ)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_SRV)

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -iquote server/src -iquote client-tests $(TEST_INC) $(TEST_CFLAGS) -c -o $@ $<

# Test sources find check_main.h; test and client-tests sources compile with Check and libcurl.
$(BUILD)/obj/server/tests/%.o $(BUILD)/obj/client-tests/tests/%.o: TEST_INC := -iquote server/tests
$(BUILD)/obj/server/tests/%.o $(BUILD)/obj/client-tests/%.o: \
  TEST_CFLAGS = $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)

$(BUILD)/tests/%: $(BUILD)/obj/server/tests/%.o $(CHECK_MAIN) $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_SRV) $(LDLIBS_CHK)

$(BUILD)/client-tests/%: $(BUILD)/obj/client-tests/tests/%.o $(CHECK_MAIN) $(KIT_OBJ) $(CT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL) $(LDLIBS_CHK) -lm

run: all
	$(BUILD)/fakegate $(ARGS)

# One test command: unit suites, then black-box suites against the built binary, then the live
# page in headless Chromium (client-tests/ui/run: npm ci of its pinned playwright-core into
# build/ui-test). Prints each suite's Check summary and a final "N passed, M failed" line;
# fails on any failure or on 0 checks.
# SANITIZE=thread (build/tsan): everything -- the server, the unit suites and the black-box
# suites with their testkit -- is built with -fsanitize=thread, since the server's threads
# (libmicrohttpd's, the scheduler's timer, the webhook sender) are where races would be. Every
# unit suite and every black-box suite runs, check_stress (20 000 requests from 8 threads, ~30 s
# here) included; check_experiments runs only its figure test (its E1-E4 are timing-based, as
# under SANITIZE=1). Out: the live page's browser test (client-tests/ui/run): it tests the page's
# JavaScript in Chromium, and the server routes it polls (/__admin/ui, timeline, requests, report,
# webhook deliveries) are all driven by check_admin_timeline, check_admin_journal,
# check_admin_report and check_webhooks already, so under TSan it would add minutes of npm and
# Chromium and no server path. scripts/run-tests points TSan at server/tests/tsan.supp and writes
# each process's reports to build/tsan/sanitizer-logs/tsan.PID: any report fails the run, also
# one from a server a test ended with SIGKILL. On a kernel whose mmap randomisation is too wide
# for GCC 12's TSan ("unexpected memory mapping") it runs everything under `setarch -R`.
ifeq ($(SANITIZE),thread)
TEST_RUN  := $(UNIT_BIN) $(BB_BIN)
else
TEST_RUN  := $(UNIT_BIN) $(BB_BIN) client-tests/ui/run
endif
test: deps $(BUILD)/fakegate $(UNIT_BIN) $(BB_BIN)
	@FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) FAKEGATE_PROFILES=$(abspath profiles) \
	  SANITIZE=$(SANITIZE) UI_TEST_DIR=$(abspath $(BUILD)/ui-test) \
	  SANITIZER_LOG_DIR=$(abspath $(BUILD)/sanitizer-logs) \
	  scripts/run-tests $(TEST_RUN)

# make memcheck: every black-box suite (client-tests/tests, check_stress and check_experiments'
# E1-E4 included) against the plain build/fakegate, each server and one-shot run of it under
# valgrind's memcheck: the harness starts it through FAKEGATE_WRAP=scripts/memcheck-wrap
# (--leak-check=full, definite and indirect leaks are errors, exit 99 on any error, one log per
# process in build/memcheck-logs). It fails on any failed check and on any non-empty log, so also
# on an error in a server a test ended with SIGKILL (only its leak check is lost). The test
# binaries run natively, and the unit suites not at all: make test SANITIZE=1 runs them under
# ASan + UBSan, whose LeakSanitizer fails them on a leak already. Check timeouts are 20 times as
# long, the harness's start and stop waits 6 times. Out: the test cases tagged "timing"
# (add_timing_tcase, client-tests/tests/testkit.h), 4 tests that bound a wall-clock time
# (resends within 10 ms, a probe's give-up time, a 1.5 s throttle window, a webhook duplicate's
# gap), which a server 20-50 times slower makes meaningless; and the browser test (the page's
# JavaScript; the routes it polls are in the black-box suites).
.PHONY: memcheck
memcheck: deps $(BUILD)/fakegate $(BB_BIN)
	@FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) FAKEGATE_PROFILES=$(abspath profiles) \
	  MEMCHECK=1 SANITIZER_LOG_DIR=$(abspath $(BUILD)/memcheck-logs) \
	  scripts/run-tests $(BB_BIN)

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)

# --- container image (docker/) ------------------------------------------------------------------
# make docker        build the image ($(DOCKER_IMAGE)): `docker build` when a Docker engine answers,
#                    else buildah with local mmdebstrap base images (root; state in build/container)
# make docker-test   build it, run it and smoke-test it (health, confirm, replay, profile switch,
#                    HEALTHCHECK, SIGTERM -> exit 0 within 2 s); fails on any failed check
# Both take DEBIAN=bookworm (default, libmicrohttpd 0.9.75) or DEBIAN=trixie (libmicrohttpd
# 1.0.1), the image's Debian release (docker/README.md compares them), passed to the scripts
# in the environment: `make docker-test DEBIAN=trixie DOCKER_IMAGE=fakegate:trixie`.
DOCKER_IMAGE ?= fakegate:latest
.PHONY: docker docker-test fresh-test
docker:
	docker/build.sh $(DOCKER_IMAGE)

docker-test:
	docker/smoke-test.sh $(DOCKER_IMAGE)

# make fresh-test    the README's two commands on a fresh machine: a Debian bookworm root file
#                    system (mmdebstrap minbase + make, cached in build/fresh) gets a clean
#                    `git archive` of HEAD; in it (chroot, as root) `make run` must print its
#                    ready line and answer GET /healthz and a confirm, then `make test` must
#                    pass. Root, and port 8080 free on the host; fails on any failed step.
#                    Measured on 2 shared cores: 3 min 55 s cold (the base tarball made, 42 s),
#                    3 min 18-44 s warm (cached; `make clean` drops it). Either way `make run`
#                    installs the server's packages (~25 s) and `make test` the tests' (~160 s
#                    with the build and the suites). DEBIAN=trixie does it on trixie instead
#                    (libmicrohttpd 1.0.1; cached in build/fresh-trixie; docker/README.md says
#                    which check fails there and why).
fresh-test:
	docker/fresh-test.sh

# ---- client-tests experiments (issue 6): `make experiments [SCALE=0.1] [ONLY=E4]` --------------
# Builds the experiment runner from client-tests/experiments/*.c and the client-tests library
# (retry, loadgen, experiment, receiver, reconcile, harness), runs E1-E3 against build/fakegate
# with the shipped profiles and E4 with its webhook receiver, at time scale SCALE (1 = real time,
# about 15 min; 0.1 about 1.5 min), and writes client-tests/results.json and
# client-tests/RESULTS.md; then client-tests/plot.sh draws RESULTS.md's figures from
# results.json (e1.svg, e2.svg, e3.svg; about 1 s). ONLY=E4 (or E1,E3 ...) runs just those and
# keeps the other experiments' rows from the existing results.json.
SCALE     ?= 1
ONLY      ?=
EXP_SRC   := $(wildcard client-tests/experiments/*.c)
EXP_OBJ   := $(EXP_SRC:%.c=$(BUILD)/obj/%.o)
EXP_BIN   := $(BUILD)/client-tests/experiments

$(EXP_BIN): $(EXP_OBJ) $(CT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL) -lm

.PHONY: experiments
experiments: deps $(BUILD)/fakegate $(EXP_BIN)
	FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) FAKEGATE_PROFILES=$(abspath profiles) \
	  $(EXP_BIN) --scale $(SCALE) $(if $(ONLY),--only $(ONLY)) \
	  --json client-tests/results.json --md client-tests/RESULTS.md
	client-tests/plot.sh client-tests/results.json client-tests

# Benchmarks (issue 7): fakegate against an nginx baseline in the same run, all scenarios in
# under 5 minutes. Writes bench/results.json and the table in BENCHMARKS.md; installs wrk, nginx
# and the nginx echo module with apt-get when missing. Measures only: exits 0 when a target is
# missed. Not part of `make test`.
.PHONY: bench
bench: deps $(BUILD)/fakegate
	bench/run.sh $(BUILD)/fakegate

# Instructions per confirm (bench/callgrind.sh): the server under callgrind, CG_WARMUP confirms,
# then CG_N unique confirms and CG_N replays counted; prints Ir per request of the request
# threads; then the same confirms with a webhook receiver, over 1000 tenants, with the report
# holding nothing, and held 20 ms, each on a fresh server (CG_VARIANTS=base for the first
# alone, about 10 s). Not part of `make test` (about 45 s).
.PHONY: callgrind
callgrind: deps $(BUILD)/fakegate
	bench/callgrind.sh $(BUILD)/fakegate

# Stress (client-tests/stress.c): 10^6 requests (STRESS_REQUESTS=N for fewer) from 32 keep-alive
# client threads over 10 000 paymentKeys -- confirms resent under the same key, under a new key
# and without one, full and partial cancels (resent), reads by paymentKey and orderId -- under a
# profile with latency, lost requests and lost responses, with 4 resets at barriers where every
# client has paused and fakegate has settled. Each epoch's ledger and transactions are checked
# against every answer the clients got (charges <= 1, acknowledged cancels applied exactly once,
# nothing left PROCESSING, reads never behind an earlier answer); prints the counts and
# fakegate's peak RSS and fails on any violation. A 20 000-request form runs in make test
# (check_stress). Measured on 2 shared cores: 186 s, 0 violations, peak RSS 87 MB. Not part of
# `make test`; `make stress STRESS_REQUESTS=20000` is a quick run.
STRESS_BIN := $(BUILD)/client-tests/stress
STRESS_OBJ := $(BUILD)/obj/client-tests/stress/main.o

$(STRESS_BIN): $(STRESS_OBJ) $(CT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL) -lm

.PHONY: stress
stress: deps $(BUILD)/fakegate $(STRESS_BIN)
	FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) $(if $(STRESS_REQUESTS),STRESS_REQUESTS=$(STRESS_REQUESTS)) \
	  $(STRESS_BIN)

# Soak (client-tests/soak.c): is memory flat when the TTLs are shorter than the run? fakegate
# with --idempotency-ttl 30 --session-ttl 30 gets 10 minutes (SOAK_SECONDS=N for fewer) of
# keep-alive load paced at 2500 requests/s from 4 threads -- new payments confirmed under fresh
# Idempotency-Keys, confirms and cancels of a bounded pool of 1000 paymentKeys resent under
# fresh keys, under their first key and without one, resends after failures, reads -- under a
# profile with a few failures; its VmRSS is sampled every 10 s. Prints the series, the requests and the verdict: after a warm-up
# of 2 TTLs every sample within 10 % of the one at its end, else exit 1. The ledger's own growth
# is kept out by the bounded pool (soak.c's header). Not part of `make test`.
SOAK_BIN := $(BUILD)/client-tests/soak
SOAK_OBJ := $(BUILD)/obj/client-tests/soak/main.o

$(SOAK_BIN): $(SOAK_OBJ) $(CT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL) -lm

.PHONY: soak
soak: deps $(BUILD)/fakegate $(SOAK_BIN)
	FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) $(if $(SOAK_SECONDS),SOAK_SECONDS=$(SOAK_SECONDS)) \
	  $(SOAK_BIN)

# ---- make crash-test: SIGKILL fakegate mid-load, restart it on the same --state-file -----------
# 32 client threads take 5000 paymentKeys through a confirm and two cancels each, resending
# every request under its Idempotency-Key until it is answered, while fakegate is killed with
# SIGKILL 20 times (150-400 ms apart, seeded) and started again on the same state file; then
# the ledger is compared with every answer (client-tests/crash.c's header): every 200 replayed
# byte for byte, each payment charged once, each acknowledged cancel in the ledger once with its
# transactionKey. Prints the counts and fails on any violation. A small form runs in make test
# (check_state_file). CRASH_ARGS='--fsync-always' passes flags.
CRASH_BIN := $(BUILD)/client-tests/crash
CRASH_OBJ := $(BUILD)/obj/client-tests/crash/main.o

$(CRASH_BIN): $(CRASH_OBJ) $(CT_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL) -lm

.PHONY: crash-test
crash-test: deps $(BUILD)/fakegate $(CRASH_BIN)
	FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) $(CRASH_BIN) $(CRASH_ARGS)

# ---- make cluster-test (issue 24): N instances behind nginx, sharing one Redis --------------------
# check_cluster starts, for each of its cases, all on 127.0.0.1 and on free ports: redis-server
# (--save '' --appendonly no, in a temp dir), three instances of the built fakegate with
# --store redis://127.0.0.1:PORT/0 (port files), and nginx (upstream round-robin over the three,
# keepalive, HTTP/1.1, proxy_next_upstream off), waits for each (PING, /healthz), and stops them
# by pid; a failing case's processes die with it (PR_SET_PDEATHSIG). The suite starts them
# itself (client-tests/tests/testkit_cluster.c) rather than a script doing it once, because its
# cases kill and restart an instance and stop Redis: each case needs a cluster of its own, and
# the processes it restarts must be children of the test that waits for them. CLUSTER_STRESS=N
# sets the stress case's requests (default 10 000). FAKEGATE_CLUSTER_STORE=memory starts the
# instances without --store (each its own store), to check the harness itself: the sharing
# assertions must then fail. scripts/install-deps cluster installs redis-server and nginx.
CLUSTER_BIN := $(BUILD)/client-tests/check_cluster

.PHONY: cluster-test
cluster-test: deps $(BUILD)/fakegate $(CLUSTER_BIN)
	@FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) FAKEGATE_PROFILES=$(abspath profiles) \
	  SANITIZE=$(SANITIZE) $(if $(CLUSTER_STRESS),CLUSTER_STRESS=$(CLUSTER_STRESS)) \
	  SANITIZER_LOG_DIR=$(abspath $(BUILD)/sanitizer-logs) \
	  scripts/run-tests $(CLUSTER_BIN)

# ---- interop suite (issue 23; docs/interop.md): `make interop` -----------------------------------
# Each program under client-tests/interop drives one client library against a fresh fakegate
# on port 0 -- the Node ones (versions pinned in client-tests/interop/node/package-lock.json,
# `npm ci` into build/interop/node) through clients/node, curl's CLI and libcurl (the small C
# program below) from Node, the Python ones (Debian's packages) through the pytest plugin
# clients/python (pip-installed offline into build/interop/venv) -- in five scenarios (a lost
# response, 503 + Retry-After, a timeout, a persistent 400, a burst of 500s), its defaults and
# a configured instance, judged by fakegate's journal, ledger and report. Prints one line per
# case and "N passed, M failed"; writes build/interop/results.jsonl and table.md (the README's
# "Tested with" table). scripts/install-deps interop installs what it misses.
INTEROP_BIN := $(BUILD)/interop/libcurl-confirm
$(INTEROP_BIN): $(BUILD)/obj/client-tests/interop/libcurl_confirm.o
	@mkdir -p $(dir $@)
	$(CC) $(ALL_CFLAGS) -o $@ $^ $(LDLIBS_CURL)

.PHONY: interop
interop: deps $(BUILD)/fakegate $(INTEROP_BIN)
	@FAKEGATE_BIN=$(abspath $(BUILD)/fakegate) LIBCURL_CONFIRM=$(abspath $(INTEROP_BIN)) \
	  INTEROP_DIR=$(abspath $(BUILD)/interop) client-tests/interop/run

# ---- built-in profiles, make install / make uninstall ------------------------------------------
# profiles/*.json are compiled into the binary (server/src/profile_builtin.c includes the rows
# scripts/embed-profiles writes, with only sh, od and awk), so a lone copy of it starts.
# make install [PREFIX=/usr/local] [DESTDIR=]   the binary to $(PREFIX)/bin, the shipped profiles
#                    to $(PREFIX)/share/fakegate/profiles (where --profile NAME looks first)
# make uninstall     remove exactly what make install put there
PROFILE_JSON := $(sort $(wildcard profiles/*.json))

$(BUILD)/gen/profiles.inc: scripts/embed-profiles $(PROFILE_JSON)
	@mkdir -p $(dir $@)
	scripts/embed-profiles $(PROFILE_JSON) > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/server/src/profile_builtin.o: $(BUILD)/gen/profiles.inc
$(BUILD)/obj/server/src/profile_builtin.o: TEST_INC := -iquote $(BUILD)/gen

# The live page's files are assembled into ui_assets.o (.incbin, paths from the repository's
# root): it is rebuilt when any of them changes.
$(BUILD)/obj/server/src/ui_assets.o: $(wildcard server/ui/*.html server/ui/*.js server/ui/*.css) \
  $(wildcard server/ui/vendor/*.js server/ui/vendor/*.css server/ui/vendor/*.txt)

PREFIX    ?= /usr/local
BINDIR    := $(PREFIX)/bin
PROFDIR   := $(PREFIX)/share/fakegate/profiles
.PHONY: install uninstall
install: all
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(PROFDIR)
	install -m 0755 $(BUILD)/fakegate $(DESTDIR)$(BINDIR)/fakegate
	install -m 0644 $(PROFILE_JSON) $(DESTDIR)$(PROFDIR)/

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/fakegate $(addprefix $(DESTDIR)$(PROFDIR)/,$(notdir $(PROFILE_JSON)))
	-rmdir $(DESTDIR)$(PROFDIR) $(DESTDIR)$(PREFIX)/share/fakegate 2>/dev/null

# ---- fuzzing: `make fuzz [SECONDS=60]` (not part of `make test`) -------------------------------
# libFuzzer harnesses (server/tests/fuzz/fuzz_NAME.c), one per parser of outside bytes: request
# bodies, profile JSON (its webhooks section too), the X-Fakegate-Fault and -Latency-Ms headers,
# query strings, Basic auth, paths and the Idempotency-Key, receiver URLs, the --state-file
# replay. Each is built with
# clang -g -O1 -fsanitize=fuzzer,address,undefined (undefined behaviour aborts) against the
# server's objects compiled again with clang into build/fuzz/obj (build/obj is left alone), then
# run for SECONDS seconds, one after another (scripts/run-fuzz), on a copy of its seeds
# (server/tests/fuzz/corpus/NAME -> build/fuzz/corpus/NAME) with its dictionary (NAME.dict).
# Prints each one's executions per second; fails if any finds a crash, a leak, undefined
# behaviour or a broken property, printing the input and the command that replays it.
# scripts/install-deps fuzz installs clang and its runtimes when missing.
SECONDS   ?= 60
FUZZ      := build/fuzz
FUZZ_CC   := clang
FUZZ_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
FUZZ_CFLAGS = -std=c11 $(WARN) -g -O1 $(FUZZ_SAN) -MMD -MP -pthread \
              $(shell pkg-config --cflags $(SRV_PKGS) 2>/dev/null)
FUZZ_SRC  := $(wildcard server/tests/fuzz/fuzz_*.c)
FUZZ_BIN  := $(FUZZ_SRC:server/tests/fuzz/%.c=$(FUZZ)/%)
FUZZ_LIB  := $(patsubst %.c,$(FUZZ)/obj/%.o,$(filter-out server/src/main.c,$(SRV_SRC)))

.PHONY: fuzz fuzz-deps
fuzz: fuzz-deps $(FUZZ_BIN)
	@scripts/run-fuzz $(SECONDS) $(FUZZ_BIN)

fuzz-deps:
	@scripts/install-deps fuzz

# Coverage instrumentation (fuzzer-no-link) for the server's objects and the harnesses alike;
# only the link adds libFuzzer's main.
$(FUZZ)/obj/%.o: %.c | fuzz-deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -iquote server/src $(FUZZ_INC) -c -o $@ $<

$(FUZZ)/fuzz_%: $(FUZZ)/obj/server/tests/fuzz/fuzz_%.o $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $^ $(LDLIBS_SRV)

$(FUZZ)/gen/profiles.inc: scripts/embed-profiles $(PROFILE_JSON)
	@mkdir -p $(dir $@)
	scripts/embed-profiles $(PROFILE_JSON) > $@.tmp && mv $@.tmp $@

$(FUZZ)/obj/server/src/profile_builtin.o: $(FUZZ)/gen/profiles.inc
$(FUZZ)/obj/server/src/profile_builtin.o: FUZZ_INC := -iquote $(FUZZ)/gen
$(FUZZ)/obj/server/src/ui_assets.o: $(wildcard server/ui/*.html server/ui/*.js server/ui/*.css) \
  $(wildcard server/ui/vendor/*.js server/ui/vendor/*.css server/ui/vendor/*.txt)

-include $(shell find $(FUZZ)/obj -name '*.d' 2>/dev/null)
