/* check_main.h -- the one main() every Check test binary shares (server/tests/check_main.c).
 *
 * A test file (server/tests/check_*.c or client-tests/tests/check_*.c) defines no main of its
 * own. It defines make_suite(), which builds and returns its Suite; check_main.c runs it with
 * srunner_run_all(sr, CK_ENV) (so CK_RUN_CASE, CK_RUN_SUITE, CK_VERBOSITY, CK_DEFAULT_TIMEOUT
 * and CK_TIMEOUT_MULTIPLIER work as Check documents them) and exits nonzero if any check failed.
 *
 * Set-up that a suite needs depending on its environment (e.g. check_experiments.c adding no
 * tests under SANITIZE=1) and per-test-case timeouts (tcase_set_timeout) belong in make_suite.
 * Process-wide set-up that must run once before the suite is built or forked (libcurl's
 * curl_global_init, signal dispositions) belongs in check_main_setup(): check_main.c defines a
 * weak one that does nothing; a binary that needs more links one strong definition of it (the
 * black-box testkit, client-tests/tests/testkit.c, does, for every black-box binary). */
#ifndef FAKEGATE_CHECK_MAIN_H
#define FAKEGATE_CHECK_MAIN_H

#include <check.h>

/* The binary's suite, newly created; the shared main runs and frees it. */
Suite *make_suite(void);

/* Called once by main before make_suite; the default does nothing (see above). */
void check_main_setup(void);

#endif
